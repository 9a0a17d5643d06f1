"""CURVE keys for prefetch servers and their clients (thin helpers over ``zmq.auth``)."""

from __future__ import annotations

import os
from pathlib import Path

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

__all__ = ["apply_client_keys", "apply_server_keys", "create_keys", "load_public_key"]


def create_keys(directory: str | os.PathLike, name: str = "server") -> tuple[Path, Path]:
    """Write ``NAME.key`` (public, to give out) and ``NAME.key_secret`` (private) into ``directory``."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    public, secret = zmq.auth.create_certificates(str(d), name)
    os.chmod(secret, 0o600)
    return Path(public), Path(secret)


def _load(path: str | os.PathLike, need_secret: bool) -> tuple[bytes, bytes | None]:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"CURVE key file {p} does not exist (create keys with `dataflow keygen DIR`)")
    try:
        public, secret = zmq.auth.load_certificate(str(p))
    except (ValueError, OSError) as e:
        raise ValueError(f"{p} is not a CURVE key file: {e}") from None
    if need_secret and not secret:
        raise ValueError(f"{p} holds no secret key; pass the NAME.key_secret file")
    return public, secret


def load_public_key(key: str | os.PathLike | bytes) -> bytes:
    """A public key given as a key file path or as its 40-character Z85 text."""
    if isinstance(key, bytes) and len(key) == 40:
        return key
    if isinstance(key, str) and len(key) == 40 and not Path(key).exists():
        return key.encode("ascii")
    return _load(key, need_secret=False)[0]


def apply_server_keys(
    ctx: zmq.Context,
    sock: zmq.Socket,
    secret_key_file: str | os.PathLike,
    authorized_dir: str | os.PathLike | None,
) -> ThreadAuthenticator:
    """Make ``sock`` a CURVE server; only clients whose public keys are in ``authorized_dir`` get in.

    Without ``authorized_dir`` any client that knows the server's public key may connect (the
    traffic is still encrypted). Returns the started authenticator; stop it when done.
    """
    public, secret = _load(secret_key_file, need_secret=True)
    auth = ThreadAuthenticator(ctx)
    auth.start()
    if authorized_dir is None:
        auth.configure_curve(domain="*", location=zmq.auth.CURVE_ALLOW_ANY)
    else:
        d = Path(authorized_dir)
        if not d.is_dir():
            auth.stop()
            raise FileNotFoundError(f"authorized keys directory {d} does not exist")
        auth.configure_curve(domain="*", location=str(d))
    sock.curve_secretkey = secret
    sock.curve_publickey = public
    sock.curve_server = True
    return auth


def apply_client_keys(
    sock: zmq.Socket, server_key: str | os.PathLike | bytes, secret_key_file: str | os.PathLike | None
) -> None:
    """Make ``sock`` a CURVE client of the server whose public key is ``server_key``.

    Without ``secret_key_file`` a throw-away key pair is used (accepted only by servers that
    authorize any client).
    """
    if secret_key_file is None:
        public, secret = zmq.curve_keypair()
    else:
        public, secret = _load(secret_key_file, need_secret=True)
    sock.curve_serverkey = load_public_key(server_key)
    sock.curve_publickey = public
    sock.curve_secretkey = secret
