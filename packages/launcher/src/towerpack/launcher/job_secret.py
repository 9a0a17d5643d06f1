"""The job's secret: node launchers prove it to each other, and the ranks' Gloo store requires a token
derived from it, so that nobody else who can reach those ports can join or disturb the job.

Where it comes from:

- one machine, or ``--hosts`` over ssh: made fresh for every job (ssh agents read it from their
  standard input, never from a command line);
- one launcher per node: every node needs the same one, from ``TOWERPACK_LAUNCH_SECRET``, else
  ``--secret-file FILE``, else ``~/.towerpack/launch-secret`` (made on first use, readable by its owner
  only; where home directories are shared, as on most clusters, every node finds the same file).

The secret itself never reaches the ranks: they get only the store's token.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from towerpack.launcher.errors import UsageError

#: Environment variable that gives the secret (per-node mode).
SECRET_VAR = "TOWERPACK_LAUNCH_SECRET"
MIN_LENGTH = 16


def new() -> bytes:
    return secrets.token_hex(32).encode()


def _checked(text: str, where: str) -> bytes:
    value = text.strip()
    if len(value) < MIN_LENGTH or "\n" in value:
        raise UsageError(f"the job secret from {where} must be one line of at least {MIN_LENGTH} characters")
    return value.encode()


def read_file(path: str | Path, where: str | None = None) -> bytes:
    where = where or f"--secret-file {path}"
    try:
        info = os.stat(path)
        text = Path(path).read_text()
    except OSError as exc:
        raise UsageError(f"cannot read the job secret ({where}): {exc.strerror}") from None
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UsageError(f"{where} can be read by other users; make it private (chmod 600 {path})")
    return _checked(text, where)


def user_default(home: str | None = None) -> bytes:
    """``~/.towerpack/launch-secret``, made (atomically, mode 600) if it does not exist yet."""
    folder = Path(home or Path.home()) / ".towerpack"
    path = folder / "launch-secret"
    if not path.exists():
        folder.mkdir(mode=0o700, exist_ok=True)
        tmp = folder / f".launch-secret.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(new().decode() + "\n")
        # link() fails if another node made the file first (also on NFS): then that one is used.
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
        os.unlink(tmp)
    return read_file(path, where=str(path))


def for_node_mode(env: dict, secret_file: str | None) -> bytes:
    """The secret every node of a per-node job must share (see the module's docstring)."""
    if env.get(SECRET_VAR):
        return _checked(env[SECRET_VAR], SECRET_VAR)
    if secret_file:
        return read_file(secret_file)
    return user_default(env.get("HOME"))


def store_token(secret: bytes) -> str:
    """The token the ranks' Gloo store requires (the secret itself stays with the launchers)."""
    return hmac.new(secret, b"towerpack gloo store", hashlib.sha256).hexdigest()[:32]
