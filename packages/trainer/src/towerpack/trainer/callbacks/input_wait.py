"""InputWaitTracker: the share of step time spent waiting for input, and whether that limits training.

The trainer's input sources measure the waiting (``InputSource.wait_clock()``): FeedInput the
Python time spent producing each batch before its run, feed-free sources (QueueInput,
StagingInput, ZMQInput, TFDatasetInput, TensorInput) the time each run's input ops block,
measured in the graph. This callback reads the clocks around every epoch and divides by the
epoch's step time.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass

from ..callback import Callback
from ..input_source.wait_clock import WaitClock

__all__ = ["INPUT_BOUND_THRESHOLD", "InputWait", "InputWaitTracker", "Verdict"]

#: A wait of at least this share of step time means input-bound: a faster input would speed
#: training up by at least 1 / (1 - 0.2) = 1.25x.
INPUT_BOUND_THRESHOLD = 0.2
#: Where the docs explain the number and what to do about it.
DOCS = "docs/input_sources.md#input-bound-or-compute-bound"


class Verdict(enum.Enum):
    INPUT_BOUND = "input-bound"
    NOT_INPUT_BOUND = "not input-bound"


@dataclass(frozen=True)
class InputWait:
    """One epoch's measurement: seconds waited (per tower), seconds of steps, their ratio."""

    wait_s: float
    step_s: float
    threshold: float

    @property
    def fraction(self) -> float:
        return min(1.0, max(0.0, self.wait_s / self.step_s))

    @property
    def verdict(self) -> Verdict:
        return Verdict.INPUT_BOUND if self.fraction >= self.threshold else Verdict.NOT_INPUT_BOUND

    def describe(self) -> str:
        """E.g. ``input wait 41% of step time: input-bound (>= 20%), see docs/...``."""
        text = f"input wait {self.fraction:.0%} of step time: {self.verdict.value}"
        if self.verdict is Verdict.INPUT_BOUND:
            text += f" (>= {self.threshold:.0%}), see {DOCS}"
        return text


class InputWaitTracker(Callback):
    """Report the share of each epoch's step time spent waiting for input.

    The scalar ``input/wait_fraction`` (0..1) goes to the monitors (TensorBoard, stats.json) at
    every epoch's end, and the epoch's log line gets e.g. ``input wait 41% of step time:
    input-bound``; ``threshold`` is the share from which training counts as input-bound. Step
    time is the wall time from ``before_epoch`` to ``after_epoch``. With several towers in one
    process the towers' waits are averaged: the share of step time a tower waits for its batch.
    ``last`` holds the latest epoch's :class:`InputWait`. Without a source that measures (no
    input source, ``PlaceholderInput``, or a feed-free source of a trainer whose
    ``measure_input_wait`` is False) it reports nothing. Runs on every process.
    """

    _chief_only = False
    SCALAR = "input/wait_fraction"

    def __init__(self, threshold: float = INPUT_BOUND_THRESHOLD):
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be a share of step time in (0, 1), got {threshold!r}")
        self.threshold = float(threshold)
        self.last: InputWait | None = None
        self._epoch_result: InputWait | None = None
        self._clocks: list[WaitClock] = []

    def _before_train(self) -> None:
        clocks = []
        for source in self.trainer.input_sources():
            clock = source.wait_clock()
            # A wrapping source and the one it wraps share one clock.
            if clock is not None and clock.readers > 0 and all(clock is not c for c in clocks):
                clocks.append(clock)
        self._clocks = clocks

    def _waited(self) -> float:
        sess = self.trainer.sess
        return sum(c.total_seconds(sess) / c.readers for c in self._clocks)

    def _before_epoch(self) -> None:
        self._epoch_result = None
        if self._clocks:
            self._start_wait = self._waited()
            self._start = time.perf_counter()

    def _after_epoch(self) -> None:
        if not self._clocks or self.trainer.steps_per_epoch <= 0:
            return
        step_s = time.perf_counter() - self._start
        if step_s <= 0:
            return
        self.last = self._epoch_result = InputWait(self._waited() - self._start_wait, step_s, self.threshold)
        self.trainer.add_epoch_note(self.last.describe())

    def _trigger_epoch(self) -> None:
        if self._epoch_result is not None:
            self.trainer.monitors.put_scalar(self.SCALAR, self._epoch_result.fraction)
