"""Callbacks that maintain and collect the model's summaries."""

from __future__ import annotations

from ..compat import tf, tfv1
from ..tower import MOVING_SUMMARY_OPS
from .base import Callback

__all__ = ["MergeAllSummaries", "MovingAverageSummary"]


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
        return self._args if self._due() else None

    def _after_run(self, run_context, run_values):
        if run_values.results is not None:
            self.trainer.monitors.put_summary(run_values.results)

    def _uses_trigger_step(self) -> bool:
        return self._run_alone and self._summary is not None

    def _trigger_step(self):
        if self._due():
            self.trainer.monitors.put_summary(self.trainer.sess.run(self._summary))
