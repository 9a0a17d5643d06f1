"""StallWatch: a consumer that waits long for a datapoint from its workers says so, never waits silently.

Runners and parallel maps wait for their workers in one place each (an :class:`~.workers.Inbox`
for worker processes, a queue or a future for threads), and each such place keeps a
:class:`StallWatch`. It times how long the consumer has been waiting inside the dataflow for its
next datapoint (the consumer's own work between two requests does not count) and logs a warning
when that passes a threshold, then again each time the wait has doubled. The warning names the
dataflow, its workers, whether they are alive, how long it has waited, and the control messages
that came instead of data.
"""

from __future__ import annotations

import collections
import logging
import math
import os
import time
from collections.abc import Callable

from ..wire.control import Message

__all__ = ["DEFAULT_STALL_WARNING_S", "STALL_WARNING_VAR", "StallWatch", "stall_warning_after"]

logger = logging.getLogger(__name__)

STALL_WARNING_VAR = "TOWERPACK_DATAFLOW_STALL_WARNING"
DEFAULT_STALL_WARNING_S = 60.0


def stall_warning_after(seconds: float | None = None, name: str = "stall_warning") -> float:
    """Seconds of waiting before the first warning: ``seconds``, else ``$TOWERPACK_DATAFLOW_STALL_WARNING``,
    else 60. ``inf`` turns the warnings off."""
    source, value = name, seconds
    if value is None:
        source, value = STALL_WARNING_VAR, os.environ.get(STALL_WARNING_VAR, "").strip() or None
    if value is None:
        return DEFAULT_STALL_WARNING_S
    try:
        after = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{source} must be a number of seconds, got {value!r}") from None
    if not after > 0:  # also refuses nan
        raise ValueError(f"{source} must be a positive number of seconds (inf: never warn), got {value!r}")
    return after


class StallWatch:
    """Times one consumer's waits for a datapoint and warns when they last too long (see the module).

    The clock runs only while the consumer is inside the dataflow's iteration: it starts when a
    wait begins (:meth:`waiting`: nothing was queued, or only control messages came) and stops at
    the next datapoint or when an iteration starts (:meth:`restart`). The dataflow calls
    :meth:`check` whenever a blocking call comes back empty-handed (bound it by :meth:`timeout`)
    and :meth:`got` with every message it receives. A datapoint that was already queued costs one
    call and no clock read.

    Args:
        owner: the dataflow's class name.
        workers: describes the workers and whether they are alive, e.g. ``"2 worker processes
            (pids 11, 12), all alive"``; called only to warn.
        after: seconds of waiting before the first warning (see :func:`stall_warning_after`).
    """

    def __init__(self, owner: str, workers: Callable[[], str], after: float) -> None:
        self.owner = owner
        self.workers = workers
        self.after = after
        self.warnings = 0
        self._since: float | None = None  # when the current wait began
        self._next = after
        self._others: collections.Counter[str] = collections.Counter()

    def restart(self) -> None:
        """The consumer has (or takes back) control: no wait is under way."""
        self._since, self._next, self.warnings = None, self.after, 0
        self._others.clear()

    def waiting(self) -> None:
        """The consumer waits now: start the clock unless it runs already."""
        if self._since is None:
            self._since = time.monotonic()

    def waited(self) -> float:
        """Seconds the current wait has lasted (0 when none is under way)."""
        return time.monotonic() - self._since if self._since is not None else 0.0

    def timeout(self) -> float | None:
        """Seconds until the next warning is due (None: never); bound blocking calls by it."""
        if math.isinf(self._next):
            return None
        return max(self._next - self.waited(), 0.001)

    def timeout_ms(self) -> int | None:
        left = self.timeout()
        return None if left is None else math.ceil(left * 1000)

    def got(self, msg: object) -> None:
        """What came: a datapoint ends the wait; a control message is counted (the wait goes on)."""
        if isinstance(msg, Message):
            self.waiting()
            self._others[type(msg).__name__] += 1
            self.check()
        elif self._since is not None or self._others:
            self.restart()

    def check(self) -> None:
        """Log the warning if it is due; the next one is due when the wait has doubled."""
        waited = self.waited()
        if self._since is None or waited < self._next:
            return
        self.warnings += 1
        self._next = max(2 * self._next, waited)
        others = ""
        if self._others:
            kinds = ", ".join(f"{n} {kind}" for kind, n in self._others.most_common())
            others = f"; it received only control messages meanwhile ({kinds})"
        logger.warning(
            "%s has waited %s s for a datapoint from its %s%s. The workers are slow, stuck (a "
            "blocking read, a lock, a remote file system), or produce nothing (empty passes, a map "
            "function returning None, a BatchData inside the workers larger than their share of the "
            "epoch). Next warning after %s s of waiting; set stall_warning= or %s to change this.",
            self.owner,
            _seconds(waited),
            self.workers(),
            others,
            _seconds(self._next),
            STALL_WARNING_VAR,
        )


def _seconds(value: float) -> str:
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"
