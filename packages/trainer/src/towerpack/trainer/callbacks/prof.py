"""ThroughputTracker: training speed in steps (or samples) per second, callbacks excluded."""

from __future__ import annotations

import time

from .base import Callback

__all__ = ["ThroughputTracker"]


class ThroughputTracker(Callback):
    """Put the epoch's throughput into the monitors at the end of every epoch.

    Time is measured from ``before_epoch`` to ``after_epoch``, so the epoch-end callbacks
    (evaluation, checkpoints) do not count; steps are hooked session runs. Scalars:
    ``Throughput (steps/sec)`` and, with ``samples_per_step``, ``Throughput (samples/sec)``.
    Runs on every process.
    """

    _chief_only = False

    def __init__(self, samples_per_step: int | None = None):
        if samples_per_step is not None and samples_per_step <= 0:
            raise ValueError(f"samples_per_step must be positive, got {samples_per_step}")
        self._samples_per_step = samples_per_step
        self.steps_per_sec: float | None = None

    def _before_epoch(self) -> None:
        self._start_step = self.global_step
        self._start = time.perf_counter()

    def _after_epoch(self) -> None:
        elapsed = time.perf_counter() - self._start
        steps = self.global_step - self._start_step
        self._elapsed, self._steps = elapsed, steps

    def _trigger_epoch(self) -> None:
        if self._steps <= 0 or self._elapsed <= 0:
            return
        self.steps_per_sec = self._steps / self._elapsed
        monitors = self.trainer.monitors
        monitors.put_scalar("Throughput (steps/sec)", self.steps_per_sec)
        if self._samples_per_step is not None:
            monitors.put_scalar("Throughput (samples/sec)", self.steps_per_sec * self._samples_per_step)
