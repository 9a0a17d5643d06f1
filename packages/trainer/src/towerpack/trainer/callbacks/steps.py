"""Callbacks that run with every step: the global step counter, the progress bar, printing
tensors, and a time limit on every session run."""

from __future__ import annotations

import os
import sys

from towerpack.dataflow.pipeline.progress import progress_bar, progress_interval
from towerpack.utils.naming import GLOBAL_STEP_INCR_OP_NAME

from .. import logger
from ..callback import Callback
from ..common import get_global_step_var
from ..compat import tf, tfv1

__all__ = ["MaintainStepCounter", "ProgressBar", "SessionRunTimeout", "TensorPrinter"]


class MaintainStepCounter(Callback):
    """Increments the ``global_step`` variable with every hooked session run.

    The trainer always registers it (before user callbacks). The Python counter
    ``trainer.global_step`` is read from the variable before training (so it survives a resume)
    and then follows the variable without reading it back.
    """

    _chief_only = False

    def _setup_graph(self):
        gs = self.gs_var = get_global_step_var()
        with tfv1.name_scope(None), tf.control_dependencies(None):
            self._incr = tfv1.assign_add(gs, 1, name=GLOBAL_STEP_INCR_OP_NAME).op
        self._args = tfv1.train.SessionRunArgs(fetches=self._incr)

    def _before_train(self):
        self.trainer._global_step = int(self.gs_var.eval(session=self.trainer.sess))

    def before_run(self, ctx):
        return self._args

    def after_run(self, run_context, run_values):
        self.trainer._global_step += 1


class ProgressBar(Callback):
    """A tqdm progress bar per epoch; ``names`` are scalar tensors shown next to it.

    An epoch resumed in its middle (``exact_resume``) starts its bar at the step it resumed at.

    Where stderr is not a terminal (a log file, a pipe) and not read by ``launch`` (which logs bars
    itself), the bar is written as a plain line every ``interval`` seconds (default
    ``$TOWERPACK_PROGRESS_INTERVAL``, else 30) and when the epoch ends.
    """

    def __init__(self, names=(), interval: float | None = None):
        self._names = [n if ":" in n else n + ":0" for n in names]
        self._interval = None if interval is None else progress_interval(interval)

    def _setup_graph(self):
        self._fetches = [self.graph.get_tensor_by_name(n) for n in self._names]
        self._tags = [n.split(":")[0].split("/")[-1] for n in self._names]
        self._args = tfv1.train.SessionRunArgs(fetches=self._fetches) if self._fetches else None

    def _before_epoch(self):
        total = self.trainer.steps_per_epoch
        self._bar = None
        if total > 0:
            refresh = float(os.environ.get("TOWERPACK_PROGRESS_REFRESH", "0.5"))
            self._bar = progress_bar(
                total=total,
                initial=self.trainer.epoch_start_step,
                file=sys.stderr,
                interval=self._interval,
                label=f"epoch {self.epoch_num}",
                dynamic_ncols=True,
                mininterval=refresh,
                smoothing=0.5,
                leave=True,
            )

    def _takes_part_in_runs(self) -> bool:
        return bool(self._fetches)

    def _uses_after_run(self) -> bool:
        return bool(self._fetches)

    def before_run(self, ctx):
        return self._args

    def _after_run(self, run_context, run_values):
        if self._fetches and self._bar is not None:
            self._bar.set_postfix(
                {tag: float(v) for tag, v in zip(self._tags, run_values.results, strict=True)}, refresh=False
            )

    def _trigger_step(self):
        if self._bar is not None:
            self._bar.update(1)

    def _after_epoch(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def _after_train(self):
        if getattr(self, "_bar", None) is not None:
            self._bar.close()
            self._bar = None


class TensorPrinter(Callback):
    """Log the values of some tensors with every step (``tf.print`` in the graph is faster).

    ``names`` is a list of tensor names, looked up in the graph and then in the first training
    tower.
    """

    def __init__(self, names):
        if not isinstance(names, (list, tuple)):
            raise TypeError(f"TensorPrinter takes a list of tensor names, got {names!r}")
        logger.warning("TensorPrinter fetches and logs with every step; tf.print in the graph is faster")
        self._names = list(names)

    def _setup_graph(self) -> None:
        self._args = tfv1.train.SessionRunArgs(fetches=self.get_tensors_maybe_in_tower(self._names))

    def before_run(self, ctx):
        return self._args

    def _after_run(self, run_context, run_values) -> None:
        for name, value in zip(self._names, run_values.results, strict=True):
            logger.info("%s: %s", name, value)


class SessionRunTimeout(Callback):
    """Give every hooked session run (every training step) at most ``timeout_in_ms``
    milliseconds; a run that takes longer raises ``tf.errors.DeadlineExceededError``, which ends
    training with that error instead of a hang. (Runs with options take the hooked session's
    general path, a full ``Session.run``: a few microseconds more per step.)"""

    def __init__(self, timeout_in_ms: int):
        if int(timeout_in_ms) <= 0:
            raise ValueError(f"timeout_in_ms must be positive, got {timeout_in_ms!r}")
        self._timeout = int(timeout_in_ms)
        options = tfv1.RunOptions(timeout_in_ms=self._timeout)
        self._args = tfv1.train.SessionRunArgs(fetches=None, options=options)

    def before_run(self, ctx):
        return self._args
