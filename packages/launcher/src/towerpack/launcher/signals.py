"""Turn SIGINT, SIGTERM and SIGHUP into events for the supervising loop."""

from __future__ import annotations

import contextlib
import queue
import signal

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Received:
    """The last handled signal that arrived (None until one does)."""

    def __init__(self) -> None:
        self.last: int | None = None


@contextlib.contextmanager
def as_events(events: queue.SimpleQueue):
    """While active, each handled signal puts ``("signal", None, signum)`` on ``events``; yields a
    ``Received`` so that code waiting on something else can notice the signal too.

    ``events`` must be a SimpleQueue: its ``put`` is reentrant, so a handler that runs while the main
    thread is inside ``put`` or ``get`` cannot deadlock (``queue.Queue`` holds a plain lock there).
    """
    received = Received()

    def handler(signum, _frame):
        received.last = signum
        events.put(("signal", None, signum))

    previous = {sig: signal.signal(sig, handler) for sig in HANDLED}
    try:
        yield received
    finally:
        for sig, prev in previous.items():
            signal.signal(sig, prev)
