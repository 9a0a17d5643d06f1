"""Ports: checking a port the user chose, and holding the ports the launcher picks for the ranks.

A port that is found free and closed again can be taken by any other process before the rank that
was given it binds it (two jobs starting at once on one machine race this way). So every port the
launcher hands out stays bound here until the node's launcher exits: bound with ``SO_REUSEADDR`` and
``SO_REUSEPORT`` and never listening. The kernel then gives that port to nobody who asks for a free
one, a plain ``bind`` of it fails, and the rank's TensorFlow server (gRPC sets ``SO_REUSEPORT``) binds
it as if it were free. ``MASTER_PORT``, which the user's own code may bind in any way, is released
just before the ranks start.
"""

from __future__ import annotations

import contextlib
import errno
import socket

from towerpack.launcher.errors import UsageError
from towerpack.launcher.net import family


def check_port(addr: str, port: int, what: str, in_use_hint: str = "pick another or leave it out") -> None:
    """Raise a UsageError naming ``what`` (and, if it is taken, ``in_use_hint``) if ``port`` cannot be
    bound on ``addr``."""
    with socket.socket(family(addr)) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((addr, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UsageError(f"{what} {addr}:{port} is already in use; {in_use_hint}") from None
            raise UsageError(f"cannot use {what} {addr}:{port}: {exc.strerror}") from None


class HeldPorts:
    """``count`` free ports, each held by a bound socket until released (see the module's docstring)."""

    def __init__(self, addr: str, count: int):
        wildcard = "::" if family(addr) == socket.AF_INET6 else "0.0.0.0"
        self._socks: dict[int, socket.socket] = {}
        try:
            for _ in range(count):
                sock = socket.socket(family(addr))
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                sock.bind((wildcard, 0))
                self._socks[sock.getsockname()[1]] = sock
        except OSError:
            self.close()
            raise
        self.ports = tuple(self._socks)

    def release(self, port: int) -> None:
        sock = self._socks.pop(port, None)
        if sock is not None:
            sock.close()

    def close(self) -> None:
        for port in list(self._socks):
            self.release(port)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
