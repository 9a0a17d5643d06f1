"""Running a list of callbacks as one, and exposing callbacks as SessionRunHooks."""

from __future__ import annotations

import time

from .. import logger
from ..callback import Callback, _overrides
from ..compat import tfv1

__all__ = ["CallbackToHook", "Callbacks"]


class CallbackToHook(tfv1.train.SessionRunHook):
    """A SessionRunHook that calls a callback's ``before_run`` / ``after_run``.

    ``needs_after_run`` tells a HookedSession whether ``after_run`` does anything.
    """

    def __init__(self, cb: Callback):
        self.cb = cb
        self.needs_after_run = cb._uses_after_run()
        # The callback's bound methods themselves: one call less per hook and step.
        self.before_run = cb.before_run
        self.after_run = cb.after_run


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
        self._step_fns: list = []  # set by setup_graph

    def setup_graph(self, trainer) -> None:
        self.trainer = trainer
        for cb in self.cbs:
            cb.setup_graph(trainer)
        # Called every step: only the callbacks that do something then, without indirection.
        self._step_fns = [
            cb.trigger_step if _overrides(cb, "trigger_step") else cb._trigger_step
            for cb in self.cbs
            if cb._uses_trigger_step()
        ]

    def get_hooks(self) -> list:
        """Hooks for the callbacks that take part in session runs (asked after setup_graph)."""
        return [CallbackToHook(cb) for cb in self.cbs if cb._takes_part_in_runs()]

    def _before_train(self):
        for cb in self.cbs:
            cb.before_train()

    def _before_epoch(self):
        for cb in self.cbs:
            cb.before_epoch()

    def _after_epoch(self):
        for cb in self.cbs:
            cb.after_epoch()

    def trigger_step(self):
        for fn in self._step_fns:
            fn()

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

    def _regrouped(self):
        for cb in self.cbs:
            cb.regrouped()

    def _after_train(self):
        for cb in self.cbs:
            try:
                cb.after_train()
            except Exception:
                logger.exception("after_train of %s failed", cb)
