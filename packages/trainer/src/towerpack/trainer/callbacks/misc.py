"""EstimatedTimeLeft: log how long the remaining epochs will take."""

from __future__ import annotations

import logging
import statistics
import time
from collections import deque

from .base import Callback

logger = logging.getLogger("towerpack.trainer.callbacks")

__all__ = ["EstimatedTimeLeft", "humanize_seconds"]


def humanize_seconds(sec: float) -> str:
    """``3725`` -> ``'1 hour 2 minutes'``; short durations keep seconds."""
    sec = max(0.0, float(sec))
    if sec < 60:
        return f"{sec:.1f} seconds" if sec < 10 else f"{sec:.0f} seconds"
    parts = []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        n, sec = divmod(sec, size)
        if n >= 1:
            parts.append(f"{int(n)} {unit}{'s' if n >= 2 else ''}")
    return " ".join(parts[:2])


class EstimatedTimeLeft(Callback):
    """After each epoch, log the estimated time left until ``max_epoch``.

    The estimate is the median (or mean with ``median=False``) duration of the last
    ``last_k_epochs`` epochs, times the epochs left; it counts everything, callbacks included.
    ``estimate`` holds the latest value in seconds.
    """

    def __init__(self, last_k_epochs: int = 5, median: bool = True):
        if last_k_epochs < 1:
            raise ValueError(f"last_k_epochs must be at least 1, got {last_k_epochs}")
        self._times = deque(maxlen=last_k_epochs)
        self._median = median
        self.estimate: float | None = None

    def _before_train(self) -> None:
        self._last = time.perf_counter()

    def _trigger_epoch(self) -> None:
        now = time.perf_counter()
        self._times.append(now - self._last)
        self._last = now
        left = self.trainer.max_epoch - self.epoch_num
        if left <= 0:
            self.estimate = 0.0
            return
        per_epoch = statistics.median(self._times) if self._median else statistics.fmean(self._times)
        self.estimate = per_epoch * left
        logger.info("Estimated time left: %s", humanize_seconds(self.estimate))
