"""Timing code: ``timed_operation`` (logs how long a block took), ``Timer`` (pausable stopwatch),
``IterSpeedCounter`` (logs how fast a line is reached), ``total_timer`` (sums per label).

Times come from ``time.perf_counter`` and are logged with the towerpack logger.
"""

from __future__ import annotations

import atexit
import contextlib
import time
from collections import defaultdict
from collections.abc import Iterator

from . import logger
from .stats import StatCounter

__all__ = ["IterSpeedCounter", "Timer", "timed_operation"]


@contextlib.contextmanager
def timed_operation(msg: str, log_start: bool = False) -> Iterator[None]:
    """Log ``'<Msg> finished, time:<seconds> sec.'`` when the block ends (and ``'Start <msg> ...'``
    before it with ``log_start``). Nothing is logged when the block raises."""
    if not msg:
        raise ValueError("timed_operation needs a message")
    if log_start:
        logger.info("Start %s ...", msg)
    start = time.perf_counter()
    yield
    logger.info("%s finished, time:%.4f sec.", msg[0].upper() + msg[1:], time.perf_counter() - start)


_TOTALS: defaultdict[str, StatCounter] = defaultdict(StatCounter)


@contextlib.contextmanager
def total_timer(msg: str) -> Iterator[None]:
    """Add the time spent in the block to the total of ``msg`` (printed at exit by ``print_total_timer``)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        _TOTALS[msg].feed(time.perf_counter() - start)


def print_total_timer() -> None:
    """Log the totals of ``total_timer`` (called at exit; nothing when there are none)."""
    for msg, stat in _TOTALS.items():
        logger.info(
            "Total Time: %s -> %.2f sec, %d times, %.3g sec/time", msg, stat.sum, stat.count, stat.average
        )


atexit.register(print_total_timer)


class IterSpeedCounter:
    """Call it once per iteration: every ``print_every`` calls it logs the time since the first call,
    the number of calls and the time per call. ``reset()`` restarts the clock (not the count)."""

    def __init__(self, print_every: int, name: str | None = None) -> None:
        if print_every < 1:
            raise ValueError(f"print_every must be at least 1, got {print_every}")
        self.cnt = 0
        self.print_every = int(print_every)
        self.name = name or "IterSpeed"
        self.start: float | None = None

    def reset(self) -> None:
        self.start = time.perf_counter()

    def __call__(self) -> None:
        if self.start is None:
            self.reset()
        self.cnt += 1
        if self.cnt % self.print_every == 0:
            t = time.perf_counter() - self.start
            logger.info("%s: %.2f sec, %d times, %.3g sec/time", self.name, t, self.cnt, t / self.cnt)


class Timer:
    """A stopwatch that can be paused: ``seconds()`` is the time since ``reset()`` (or creation)
    less the time spent paused."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._start = time.perf_counter()
        self._paused_at: float | None = None
        self._paused_total = 0.0

    def pause(self) -> None:
        if self._paused_at is not None:
            raise RuntimeError("Timer.pause(): already paused")
        self._paused_at = time.perf_counter()

    def is_paused(self) -> bool:
        return self._paused_at is not None

    def resume(self) -> None:
        if self._paused_at is None:
            raise RuntimeError("Timer.resume(): not paused")
        self._paused_total += time.perf_counter() - self._paused_at
        self._paused_at = None

    def seconds(self) -> float:
        end = self._paused_at if self._paused_at is not None else time.perf_counter()
        return end - self._start - self._paused_total
