"""Reachability at start: every node can reach every other node at the address it advertises.

While a multi-node job starts, each node's launcher answers TCP connections on its address
(``ProbeListener``); every node then tries to connect to others (``probe``), and the job does not
start if one cannot: better one clear line naming the two nodes and the address than ranks that hang
in their first collective. ``--network-interface`` or ``--node-addr`` pick another address.

Up to ``ALL_PAIRS_UP_TO`` nodes, every node checks every other one. Beyond, all pairs would be N^2
connections (a million at 1,000 nodes), so each node checks those 1, 2, 4, 8, ... places after it in
node order (``peers``): N log N connections, every node checked by log2 N others at every distance,
so a node nobody can reach, or a block of nodes cut off from the rest, is still found.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterable

from towerpack.launcher.net import family, host_port
from towerpack.launcher.protocol import ProbeTarget

PROBE_TIMEOUT_S = 5.0
ALL_PAIRS_UP_TO = 16


def peers(i: int, n: int) -> list[int]:
    """The positions (0..n-1) that the node at position ``i`` of ``n`` checks (see the docstring)."""
    if n <= ALL_PAIRS_UP_TO:
        return [j for j in range(n) if j != i]
    return [(i + d) % n for d in (1 << k for k in range(n.bit_length())) if d < n]


class ProbeListener:
    """Accepts (and at once closes) connections on ``addr``, or on every address if ``addr`` is not
    one of this machine's (behind NAT the advertised address may belong to a router)."""

    def __init__(self, addr: str):
        self.sock = socket.socket(family(addr))
        try:
            self.sock.bind((addr, 0))
        except OSError:
            self.sock.bind(("::" if family(addr) == socket.AF_INET6 else "0.0.0.0", 0))
        self.sock.listen(256)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def probe(targets: Iterable[ProbeTarget], timeout: float = PROBE_TIMEOUT_S) -> list[str]:
    """Connect to every target at once; one line per target that could not be reached."""
    return list(unreachable(targets, timeout).values())


def unreachable(targets: Iterable[ProbeTarget], timeout: float = PROBE_TIMEOUT_S) -> dict[int, str]:
    """Connect to every target at once: the node of each target that could not be reached, with the
    line that says why (in the targets' order)."""
    problems: dict[int, str] = {}
    targets = list(targets)

    def one(i: int, t: ProbeTarget) -> None:
        try:
            with socket.create_connection((t.addr, t.port), timeout=timeout):
                pass
        except OSError as exc:
            reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
            problems[i] = f"node {t.node} at {host_port(t.addr, t.port)} ({reason})"

    threads = [threading.Thread(target=one, args=(i, t), daemon=True) for i, t in enumerate(targets)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 1.0)
    return {targets[i].node: problems[i] for i in sorted(problems)}
