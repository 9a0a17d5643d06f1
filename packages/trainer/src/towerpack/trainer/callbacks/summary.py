"""Callbacks that maintain and collect the model's summaries, and simple moving averages of scalars."""

from __future__ import annotations

from collections import deque

import numpy as np

from ..callback import Callback
from ..common import get_op_tensor_name
from ..compat import tf, tfv1
from ..tower import MOVING_SUMMARY_OPS

__all__ = ["MergeAllSummaries", "MovingAverageSummary", "SimpleMovingAverage"]


class MovingAverageSummary(Callback):
    """Runs the moving-average updates of ``add_moving_summary`` with every step."""

    def __init__(self, collection: str = MOVING_SUMMARY_OPS):
        self._collection = collection

    def _setup_graph(self):
        ops = tfv1.get_collection(self._collection)
        self._args = (
            tfv1.train.SessionRunArgs(fetches=tf.group(*ops, name="maintain_moving_summaries"))
            if ops
            else None
        )

    def _takes_part_in_runs(self) -> bool:
        return self._args is not None

    def before_run(self, ctx):
        return self._args


class MergeAllSummaries(Callback):
    """Evaluates all summaries with the last step of each epoch (and every ``period`` steps if
    ``period > 0``) and hands them to the monitors.

    With ``run_alone=True`` the summaries are evaluated by a separate ``sess.run`` at those times,
    which only works when they do not depend on the input pipeline.
    """

    def __init__(self, period: int = 0, run_alone: bool = False, key: str = tfv1.GraphKeys.SUMMARIES):
        self._period = int(period)
        self._run_alone = run_alone
        self._key = key

    def _setup_graph(self):
        self._summary = tfv1.summary.merge_all(self._key)
        self._args = tfv1.train.SessionRunArgs(fetches=self._summary) if self._summary is not None else None

    def _due(self) -> bool:
        last_of_epoch = self.trainer.local_step == self.trainer.steps_per_epoch - 1
        periodic = self._period > 0 and (self.trainer.global_step + 1) % self._period == 0
        return last_of_epoch or periodic

    def _takes_part_in_runs(self) -> bool:
        return self._args is not None and not self._run_alone

    def before_run(self, ctx):
        return None if self._run_alone or not self._due() else self._args

    def _after_run(self, run_context, run_values):
        if run_values.results is not None:
            self.trainer.monitors.put_summary(run_values.results)

    def _uses_trigger_step(self) -> bool:
        return self._run_alone and self._summary is not None

    def _trigger_step(self):
        if self._due():
            self.trainer.monitors.put_summary(self.trainer.sess.run(self._summary))


class SimpleMovingAverage(Callback):
    """The mean of scalar tensors over the last ``window_size`` steps, reported as
    ``<op name>/SMA`` every ``window_size`` global steps.

    ``tensors`` is a list of names of scalar tensors (looked up in the graph, then in the first
    training tower). The values are fetched with every step; at a global step that is a multiple
    of ``window_size`` the mean of those kept so far (at most ``window_size``) goes to the monitors.
    """

    def __init__(self, tensors, window_size: int):
        if not isinstance(tensors, (list, tuple)):
            raise TypeError(f"SimpleMovingAverage takes a list of tensor names, got {tensors!r}")
        if int(window_size) < 1:
            raise ValueError(f"window_size must be at least 1, got {window_size!r}")
        self._names = [get_op_tensor_name(t)[1] for t in tensors]
        self._tags = [get_op_tensor_name(t)[0] + "/SMA" for t in tensors]
        self._window = int(window_size)
        self._values: deque = deque(maxlen=self._window)

    def _setup_graph(self):
        tensors = self.get_tensors_maybe_in_tower(self._names)
        for t in tensors:
            if t.shape.ndims != 0:
                raise ValueError(f"SimpleMovingAverage needs scalar tensors; {t.name} has shape {t.shape}")
        self._args = tfv1.train.SessionRunArgs(fetches=tensors)

    def before_run(self, ctx):
        return self._args

    def _after_run(self, run_context, run_values):
        self._values.append(run_values.results)

    def _trigger_step(self):
        if self.global_step % self._window == 0 and self._values:
            means = np.mean(np.asarray(self._values, dtype=np.float64), axis=0)
            for tag, value in zip(self._tags, means, strict=True):
                self.trainer.monitors.put_scalar(tag, value)
