"""The signals a launcher passes on to its ranks, turned into events for its supervising loop.

SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 (what schedulers send for pre-emption: Slurm's
``--signal``, Kubernetes, spot-instance notices) reach every worker as the same signal.
"""

from __future__ import annotations

import contextlib
import queue
import signal

from towerpack.launcher.events import SignalReceived

HANDLED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


class Received:
    """The last handled signal that arrived (None until one does)."""

    def __init__(self) -> None:
        self.last: int | None = None


@contextlib.contextmanager
def as_events(events: queue.SimpleQueue):
    """While active, each handled signal puts ``SignalReceived(signum)`` on ``events``; yields a
    ``Received`` so that code waiting on something else can notice the signal too.

    ``events`` must be a SimpleQueue: its ``put`` is reentrant, so a handler that runs while the main
    thread is inside ``put`` or ``get`` cannot deadlock (``queue.Queue`` holds a plain lock there).
    """
    received = Received()

    def handler(signum, _frame):
        received.last = signum
        events.put(SignalReceived(signum))

    previous = {sig: signal.signal(sig, handler) for sig in HANDLED}
    try:
        yield received
    finally:
        for sig, prev in previous.items():
            signal.signal(sig, prev)
