"""Running a list of callbacks as one, and exposing callbacks as SessionRunHooks."""

from __future__ import annotations

import time

from .. import logger
from ..compat import tfv1
from .base import Callback

__all__ = ["CallbackToHook", "Callbacks"]


class CallbackToHook(tfv1.train.SessionRunHook):
    """A SessionRunHook that calls a callback's ``before_run`` / ``after_run``."""

    def __init__(self, cb: Callback):
        self.cb = cb

    def before_run(self, run_context):
        return self.cb.before_run(run_context)

    def after_run(self, run_context, run_values):
        self.cb.after_run(run_context, run_values)


def _uses_runs(cb: Callback) -> bool:
    """Whether the callback takes part in session runs (only those become hooks)."""
    cls = type(cb)
    return any(
        getattr(cls, name) is not getattr(Callback, name)
        for name in ("before_run", "after_run", "_before_run", "_after_run")
    )


class Callbacks(Callback):
    """The trainer's callbacks, called in registration order.

    ``after_train`` of every callback runs even when another one fails (failures are logged),
    and slow ``trigger_epoch`` calls are reported.
    """

    _chief_only = False

    def __init__(self, cbs: list[Callback]):
        for cb in cbs:
            if not isinstance(cb, Callback):
                raise TypeError(f"{cb!r} is not a Callback")
        self.cbs = list(cbs)

    def setup_graph(self, trainer) -> None:
        self.trainer = trainer
        for cb in self.cbs:
            cb.setup_graph(trainer)

    def get_hooks(self) -> list:
        return [CallbackToHook(cb) for cb in self.cbs if _uses_runs(cb)]

    def _before_train(self):
        for cb in self.cbs:
            cb.before_train()

    def _before_epoch(self):
        for cb in self.cbs:
            cb.before_epoch()

    def _after_epoch(self):
        for cb in self.cbs:
            cb.after_epoch()

    def _trigger_step(self):
        for cb in self.cbs:
            cb.trigger_step()

    def _trigger_epoch(self):
        times = []
        start = time.perf_counter()
        for cb in self.cbs:
            t = time.perf_counter()
            cb.trigger_epoch()
            times.append((time.perf_counter() - t, cb))
        total = time.perf_counter() - start
        if total > 1.0:
            slow = [f"{cb}: {t:.2f}s" for t, cb in times if t > 0.3 * total]
            logger.info(
                "Callbacks took %.2fs at the end of the epoch; most of it: %s", total, ", ".join(slow)
            )

    def _after_train(self):
        for cb in self.cbs:
            try:
                cb.after_train()
            except Exception:
                logger.exception("after_train of %s failed", cb)
