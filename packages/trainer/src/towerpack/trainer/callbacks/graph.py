"""Callbacks that run graph ops: before training, on trigger, or with every step."""

from __future__ import annotations

from .. import logger
from ..compat import tf, tfv1
from .base import Callback

__all__ = ["RunOp", "RunUpdateOps"]


class RunOp(Callback):
    """Runs an op before training, at every trigger, and/or with every step.

    Args:
        op: an op or tensor, or a function that builds one (called while the graph is set up).
        run_before: run once before training starts.
        run_as_trigger: run at every trigger (by default the end of every epoch).
        run_step: run together with every training step (in the same session run).
    """

    _chief_only = False

    def __init__(
        self,
        op,
        run_before: bool = True,
        run_as_trigger: bool = True,
        run_step: bool = False,
        verbose: bool = False,
    ):
        self.setup_func = (
            op if callable(op) and not isinstance(op, (tf.Operation, tf.Tensor)) else (lambda: op)
        )
        self.run_before = run_before
        self.run_as_trigger = run_as_trigger
        self.run_step = run_step
        self.verbose = verbose

    def _setup_graph(self):
        self._op = self.setup_func()
        self._args = tfv1.train.SessionRunArgs(fetches=self._op) if self.run_step else None

    def _run(self):
        if self.verbose:
            logger.info("Running op %s ...", self._op.name)
        self.trainer.sess.run(self._op)

    def _before_train(self):
        if self.run_before:
            self._run()

    def _trigger(self):
        if self.run_as_trigger:
            self._run()

    def _takes_part_in_runs(self) -> bool:
        return self._args is not None

    def before_run(self, ctx):
        return self._args

    def __str__(self):
        op = getattr(self, "_op", None)
        return f"RunOp({op.name})" if op is not None else "RunOp"


class RunUpdateOps(RunOp):
    """Runs the ops in a collection (UPDATE_OPS: batch-norm statistics and the like) with every step."""

    def __init__(self, collection: str = tfv1.GraphKeys.UPDATE_OPS):
        self._collection = collection

        def make():
            ops = tfv1.get_collection(collection)
            return tf.group(*ops, name="update_ops") if ops else None

        super().__init__(make, run_before=False, run_as_trigger=False, run_step=True)

    def _setup_graph(self):
        self._op = self.setup_func()
        self._args = tfv1.train.SessionRunArgs(fetches=self._op) if self._op is not None else None
