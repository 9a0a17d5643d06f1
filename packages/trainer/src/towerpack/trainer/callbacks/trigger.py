"""Change when another callback runs: every k steps or epochs, or only when a predicate holds."""

from __future__ import annotations

from collections.abc import Callable

from ..callback import Callback, ProxyCallback

__all__ = ["EnableCallbackIf", "PeriodicCallback", "PeriodicTrigger"]


def _check_period(name: str, k: int | None) -> int | None:
    if k is None:
        return None
    if int(k) != k or k <= 0:
        raise ValueError(f"{name} must be a positive integer, got {k!r}")
    return int(k)


class PeriodicTrigger(ProxyCallback):
    """Call the wrapped callback's ``trigger()`` every k global steps and/or every k epochs.

    Replaces the callback's own epoch-end trigger: with ``every_k_epochs=None`` it triggers only
    on the step schedule. Everything else (setup, runs, ``trigger_step``) is forwarded as is.
    With ``before_train=True`` it also triggers once right before training starts.
    """

    def __init__(
        self,
        triggerable: Callback,
        every_k_steps: int | None = None,
        every_k_epochs: int | None = None,
        before_train: bool = False,
    ):
        super().__init__(triggerable)
        self._step_k = _check_period("every_k_steps", every_k_steps)
        self._epoch_k = _check_period("every_k_epochs", every_k_epochs)
        if self._step_k is None and self._epoch_k is None and not before_train:
            raise ValueError("PeriodicTrigger needs every_k_steps, every_k_epochs or before_train=True")
        self._before_train_flag = before_train

    def _before_train(self):
        self.cb.before_train()
        if self._before_train_flag:
            self.cb.trigger()

    def _trigger_step(self):
        self.cb.trigger_step()
        if self._step_k is not None and self.global_step % self._step_k == 0:
            self.cb.trigger()

    def _trigger_epoch(self):
        if self._epoch_k is not None and self.epoch_num % self._epoch_k == 0:
            self.cb.trigger()

    def __str__(self) -> str:
        return f"PeriodicTrigger({self.cb}, every_k_steps={self._step_k}, every_k_epochs={self._epoch_k})"


class EnableCallbackIf(ProxyCallback):
    """Run the wrapped callback's per-run, per-step and per-epoch methods only when ``pred(self)``
    is true. Setup, ``before_train`` and ``after_train`` always run.

    ``pred`` receives this callback, so it can read ``self.epoch_num``, ``self.global_step``,
    ``self.local_step`` and ``self.trainer``.
    """

    def __init__(self, callback: Callback, pred: Callable[[Callback], bool]):
        super().__init__(callback)
        if not callable(pred):
            raise TypeError(f"pred must be callable, got {pred!r}")
        self._pred = pred
        self._enabled_this_run = False

    def before_run(self, ctx):
        self._enabled_this_run = bool(self._pred(self))
        return self.cb.before_run(ctx) if self._enabled_this_run else None

    def _after_run(self, run_context, run_values):
        if self._enabled_this_run:
            self.cb.after_run(run_context, run_values)

    def _before_epoch(self):
        if self._pred(self):
            self.cb.before_epoch()

    def _after_epoch(self):
        if self._pred(self):
            self.cb.after_epoch()

    def _trigger_step(self):
        if self._pred(self):
            self.cb.trigger_step()

    def _trigger_epoch(self):
        if self._pred(self):
            self.cb.trigger_epoch()

    def _trigger(self):
        if self._pred(self):
            self.cb.trigger()

    def __str__(self) -> str:
        return f"EnableCallbackIf({self.cb})"


# EnableCallbackIf's run methods only gate the wrapped callback's (see ProxyCallback).
EnableCallbackIf._FORWARDING_BASE = EnableCallbackIf


class PeriodicCallback(EnableCallbackIf):
    """Enable the wrapped callback every k global steps and/or every k epochs, and on the very
    last step of training (so a final evaluation or save is never skipped).

    Unlike :class:`PeriodicTrigger` this gates all of the callback's methods, not only ``trigger``.
    """

    def __init__(
        self, callback: Callback, every_k_steps: int | None = None, every_k_epochs: int | None = None
    ):
        step_k = _check_period("every_k_steps", every_k_steps)
        epoch_k = _check_period("every_k_epochs", every_k_epochs)
        if step_k is None and epoch_k is None:
            raise ValueError("PeriodicCallback needs every_k_steps or every_k_epochs")
        self._step_k, self._epoch_k = step_k, epoch_k
        super().__init__(callback, PeriodicCallback._enabled)

    def _enabled(self) -> bool:
        if self._step_k is not None and self.global_step % self._step_k == 0:
            return True
        if self._epoch_k is not None and self.epoch_num % self._epoch_k == 0:
            return True
        t = self.trainer
        return (
            self._step_k is not None
            and self.epoch_num == t.max_epoch
            and self.local_step == t.steps_per_epoch - 1
        )

    def __str__(self) -> str:
        return f"PeriodicCallback({self.cb}, every_k_steps={self._step_k}, every_k_epochs={self._epoch_k})"
