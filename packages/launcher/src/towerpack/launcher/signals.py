"""Turn SIGINT, SIGTERM and SIGHUP into events for the supervising loop."""

from __future__ import annotations

import contextlib
import queue
import signal

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def as_events(events: queue.Queue):
    """While active, each handled signal puts ``("signal", None, signum)`` on ``events``."""
    previous = {
        sig: signal.signal(sig, lambda signum, _frame: events.put(("signal", None, signum)))
        for sig in HANDLED
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
