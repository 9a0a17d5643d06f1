"""HookToCallback: use a ``tf.compat.v1.train.SessionRunHook`` as a callback.

(The other direction, CallbackToHook, is in ``group.py``: that is how the trainer runs callbacks.)
"""

from __future__ import annotations

from ..callback import Callback
from ..compat import tfv1

__all__ = ["HookToCallback"]


class HookToCallback(Callback):
    """Run a SessionRunHook as a callback: ``begin()`` while the graph is set up (at the root name
    scope), ``after_create_session(sess, None)`` before training, ``before_run``/``after_run``
    around every hooked run, and ``end(sess)`` after training. Runs on every process."""

    _chief_only = False

    def __init__(self, hook):
        if not isinstance(hook, tfv1.train.SessionRunHook):
            raise TypeError(f"HookToCallback takes a tf.compat.v1.train.SessionRunHook, got {hook!r}")
        self._hook = hook

    def _setup_graph(self) -> None:
        with tfv1.name_scope(None):
            self._hook.begin()

    def _before_train(self) -> None:
        self._hook.after_create_session(self.trainer.sess, None)

    def before_run(self, ctx):
        return self._hook.before_run(ctx)

    def after_run(self, run_context, run_values) -> None:
        self._hook.after_run(run_context, run_values)

    def _after_train(self) -> None:
        self._hook.end(self.trainer.sess)

    def __str__(self) -> str:
        return f"HookToCallback({type(self._hook).__name__})"
