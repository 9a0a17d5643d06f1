"""StartProcOrThread: start processes or threads with training, and stop them after it."""

from __future__ import annotations

import contextlib
import multiprocessing.process
import signal
import threading

from .. import logger
from ..callback import Callback

__all__ = ["StartProcOrThread"]

#: Seconds ``after_train`` waits for each process or thread to end.
JOIN_TIMEOUT_S = 5.0


@contextlib.contextmanager
def _sigint_blocked():
    """Block SIGINT in this thread meanwhile: what it starts inherits the mask, so Ctrl-C reaches
    the trainer (which then stops them) rather than every child at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class StartProcOrThread(Callback):
    """Start processes or threads (anything with ``name`` and ``start()``) right before training,
    with SIGINT blocked in them.

    With ``stop_at_last=True``, after training every ``multiprocessing`` process still alive is
    terminated, and every thread still alive that has a ``stop()`` method is stopped; each gets
    ``JOIN_TIMEOUT_S`` seconds to end (a failure is logged). Other objects are left alone. Runs
    on every process.
    """

    _chief_only = False

    def __init__(self, startable, stop_at_last: bool = True):
        if not isinstance(startable, (list, tuple)):
            startable = [startable]
        for item in startable:
            if not callable(getattr(item, "start", None)) or not hasattr(item, "name"):
                raise TypeError(f"StartProcOrThread starts objects with 'name' and 'start()', got {item!r}")
        self._items = list(startable)
        self._stop_at_last = stop_at_last

    def _before_train(self) -> None:
        logger.info("Starting %s ...", ", ".join(str(item.name) for item in self._items))
        with _sigint_blocked():
            for item in self._items:
                item.start()

    def _after_train(self) -> None:
        if not self._stop_at_last:
            return
        for item in self._items:
            is_process = isinstance(item, multiprocessing.process.BaseProcess)
            stoppable = isinstance(item, threading.Thread) and callable(getattr(item, "stop", None))
            if not (is_process or stoppable) or not item.is_alive():
                continue
            logger.info("%s %s ...", "Terminating process" if is_process else "Stopping thread", item.name)
            if is_process:
                item.terminate()
            else:
                item.stop()
            item.join(JOIN_TIMEOUT_S)
            if item.is_alive():
                logger.error("%s did not end within %.0f s", item.name, JOIN_TIMEOUT_S)
