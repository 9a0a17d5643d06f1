"""Keep Ctrl-C working while received zero-copy frames are freed.

pyzmq checks for pending signals when it frees a message frame (``Frame.__dealloc__``), and so
runs the SIGINT handler there. The KeyboardInterrupt it raises cannot propagate out of a
deallocator: Python reports it as "Exception ignored" and the program runs on, so about one
Ctrl-C in a hundred was lost in a receive loop. The hook installed here delivers such an
interrupt (from a frame or any other finalizer) to the main thread again, where it is raised
as usual.
"""

from __future__ import annotations

import _thread
import signal
import sys
import threading
import time

__all__ = ["install_interrupt_rescue"]

# Long enough for the unraisable hook to return before the signal arrives again.
_REDELIVERY_DELAY = 0.005


def _redeliver_sigint() -> None:
    handler = signal.getsignal(signal.SIGINT)
    if not callable(handler):  # SIG_IGN or SIG_DFL now: the interrupt cannot have come from it
        return

    def send() -> None:
        time.sleep(_REDELIVERY_DELAY)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    # A low-level thread: threading.Thread.start() waits for the thread and could be interrupted.
    _thread.start_new_thread(send, ())


def install_interrupt_rescue() -> None:
    """Wrap ``sys.unraisablehook`` once; every other unraisable exception goes to the previous hook."""
    previous = sys.unraisablehook
    if getattr(previous, "_towerpack_rescue", False):
        return

    def hook(unraisable) -> None:
        try:
            if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
                _redeliver_sigint()
            else:
                previous(unraisable)
        except KeyboardInterrupt:  # a Ctrl-C that arrived while this hook ran would be lost too
            _redeliver_sigint()

    hook._towerpack_rescue = True
    sys.unraisablehook = hook
