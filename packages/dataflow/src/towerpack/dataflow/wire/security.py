"""Who may connect to a data server: CURVE keys (helpers over ``zmq.auth``) and a connection cap.

A server answers ZMQ's authentication requests (ZAP) itself, in its own loop, with
:class:`Gatekeeper`: a connection is admitted if its CURVE key is authorized (when the server
uses CURVE with an authorized-keys directory) and the server has fewer than its maximum of
connections. Without CURVE, ZAP still runs (the socket gets a ZAP domain), so the cap holds too.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import zmq
import zmq.auth
from zmq.utils import z85

__all__ = ["Gatekeeper", "apply_client_keys", "apply_server_keys", "create_keys", "load_public_key"]

logger = logging.getLogger(__name__)

#: Where libzmq sends authentication requests (ZAP, RFC 27) within a context.
ZAP_ENDPOINT = "inproc://zeromq.zap.01"
ZAP_DOMAIN = b"towerpack"


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


def apply_server_keys(sock: zmq.Socket, secret_key_file: str | os.PathLike) -> None:
    """Make ``sock`` a CURVE server with the key pair in ``secret_key_file``."""
    public, secret = _load(secret_key_file, need_secret=True)
    sock.curve_secretkey = secret
    sock.curve_publickey = public
    sock.curve_server = True


def load_authorized(directory: str | os.PathLike) -> set[bytes]:
    """The Z85 public keys of the ``*.key`` files in ``directory``."""
    d = Path(directory)
    if not d.is_dir():
        raise FileNotFoundError(f"authorized keys directory {d} does not exist")
    return set(zmq.auth.load_certificates(str(d)))


class Gatekeeper:
    """Answers the ZAP requests of one context's sockets: authorized CURVE keys, and ``admit()``.

    ``authorized`` is the set of admitted Z85 public keys (None: any key); ``admit`` says whether
    one more connection may come in. Call :meth:`handle` when :attr:`sock` is readable.
    """

    def __init__(self, ctx: zmq.Context, authorized: set[bytes] | None, admit: Callable[[], bool]) -> None:
        self.authorized = authorized
        self.admit = admit
        self.refused = 0
        self.sock = ctx.socket(zmq.REP)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(ZAP_ENDPOINT)

    def _decide(self, mechanism: bytes, credentials: list[bytes]) -> tuple[bytes, bytes]:
        if mechanism == b"CURVE" and self.authorized is not None:
            if not credentials or z85.encode(credentials[0]) not in self.authorized:
                return b"400", b"key not authorized"
        elif mechanism not in (b"NULL", b"CURVE"):
            return b"400", b"mechanism not allowed"
        if not self.admit():
            return b"400", b"too many connections"
        return b"200", b"OK"

    def handle(self) -> None:
        frames = self.sock.recv_multipart()
        if len(frames) < 6:
            self.sock.send_multipart(
                [b"1.0", frames[1] if len(frames) > 1 else b"", b"400", b"bad request", b"", b""]
            )
            return
        request_id, mechanism, credentials = frames[1], frames[5], frames[6:]
        status, text = self._decide(mechanism, credentials)
        if status != b"200":
            self.refused += 1
            if self.refused <= 10 or self.refused % 100 == 0:
                logger.warning("refused a connection #%d: %s", self.refused, text.decode())
        self.sock.send_multipart([b"1.0", request_id, status, text, b"", b""])

    def close(self) -> None:
        self.sock.close(linger=0)


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
