"""Stop-signal handlers that take over only Python's default handlers and give them back.

A training process that is asked to stop (a scheduler's SIGTERM, ``launch`` passing on SIGUSR1, a
Ctrl-C) must finish what it is doing rather than die: the pre-emption callback saves a checkpoint,
a parameter server keeps serving its workers. Both install handlers the same way, written here once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable

__all__ = ["STOP_SIGNALS", "StopSignalHandlers"]

#: The signals that ask a training to stop (the ones ``launch`` passes on).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)

_DEFAULTS = (signal.SIG_DFL, signal.default_int_handler)


class StopSignalHandlers:
    """Call ``handler(signum, frame)`` on ``signals``, for the signals whose handler is Python's default.

    A handler of the user's own, or a signal set to be ignored, stays as it was. After a signal of
    ``once`` has been handled, its previous handler comes back, so that a second Ctrl-C interrupts
    as usual. ``restore()`` (or leaving the ``with`` block) puts every previous handler back.
    Handlers can only be installed from the main thread: elsewhere ``install()`` returns False and
    changes nothing.
    """

    def __init__(
        self,
        handler: Callable[[int, object], None],
        signals: Iterable[int] = STOP_SIGNALS,
        once: Iterable[int] = (signal.SIGINT,),
    ):
        self.handler = handler
        self.signals = tuple(signals)
        self.once = frozenset(once)
        self.previous: dict[int, object] = {}

    def install(self) -> bool:
        """Install the handlers; False (and nothing installed) outside the main thread."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for sig in self.signals:
            if sig not in self.previous and signal.getsignal(sig) in _DEFAULTS:
                self.previous[sig] = signal.signal(sig, self._handle)
        return True

    def _handle(self, signum: int, frame) -> None:
        if signum in self.once and signum in self.previous:
            signal.signal(signum, self.previous[signum])
        self.handler(signum, frame)

    def restore(self) -> None:
        """Put back the handlers that were there before ``install()``."""
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        self.previous = {}

    def __enter__(self) -> StopSignalHandlers:
        self.install()
        return self

    def __exit__(self, *exc) -> None:
        self.restore()
