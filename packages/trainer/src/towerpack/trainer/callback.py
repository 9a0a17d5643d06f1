"""The Callback interface: the hooks a trainer calls around graph setup, epochs and steps.

It sits outside the ``callbacks`` package so that what callbacks build on (input sources, the
trainer) imports the interface without importing every callback (which import input sources).
"""

from __future__ import annotations

from .common import get_op_tensor_name, get_tensors_by_names
from .compat import tfv1

__all__ = ["Callback", "CallbackFactory", "ProxyCallback"]


class Callback:
    """Base class of callbacks. Subclasses override the underscored methods.

    Order of calls made by a trainer::

        setup_graph(trainer)      # graph building; runs under a name scope named after the class
        before_train()            # graph finalized, session created (default session set)
        for each epoch:
            before_epoch()
            for each step:
                before_run(ctx) / after_run(ctx, values)   # around every hooked_sess.run
                trigger_step()
            after_epoch()
            trigger_epoch()       # by default calls trigger()
        after_train()             # always, also after an error

    ``_before_run`` may return None, a list/dict of tensors, ops or their names, or a
    ``tf.compat.v1.train.SessionRunArgs``; the fetched values reach ``_after_run`` as
    ``run_values.results``.

    Callbacks are chief-only by default: on a non-chief process of a distributed job the trainer
    skips them unless ``set_chief_only(False)`` was called.
    """

    _chief_only = True
    #: The trainer (or predictor) that set this callback up; None before ``setup_graph``.
    trainer = None

    # ---- what a trainer calls -------------------------------------------------------------
    def setup_graph(self, trainer) -> None:
        self.trainer = trainer
        self.graph = tfv1.get_default_graph()
        scope = type(self).__name__.replace("_", "")
        with tfv1.name_scope(scope):
            self._setup_graph()

    def before_train(self) -> None:
        self._before_train()

    def before_epoch(self) -> None:
        self._before_epoch()

    def after_epoch(self) -> None:
        self._after_epoch()

    def before_run(self, ctx):
        fetches = self._before_run(ctx)
        if fetches is None:
            return None
        if isinstance(fetches, tfv1.train.SessionRunArgs):
            return fetches
        return tfv1.train.SessionRunArgs(fetches=self._resolve_fetches(fetches))

    def after_run(self, run_context, run_values) -> None:
        self._after_run(run_context, run_values)

    def trigger_step(self) -> None:
        self._trigger_step()

    def trigger_epoch(self) -> None:
        self._trigger_epoch()

    def trigger(self) -> None:
        self._trigger()

    def after_train(self) -> None:
        self._after_train()

    def regrouped(self) -> None:
        """The job was resized in place (its ranks, world size and global step may have changed)."""
        self._regrouped()

    # ---- what subclasses override ---------------------------------------------------------
    def _setup_graph(self) -> None:
        pass

    def _before_train(self) -> None:
        pass

    def _before_epoch(self) -> None:
        pass

    def _after_epoch(self) -> None:
        pass

    def _before_run(self, ctx):
        return None

    def _after_run(self, run_context, run_values) -> None:
        pass

    def _trigger_step(self) -> None:
        pass

    def _trigger_epoch(self) -> None:
        self.trigger()

    def _trigger(self) -> None:
        pass

    def _after_train(self) -> None:
        pass

    def _regrouped(self) -> None:
        """Override when the callback keeps a schedule that every rank must share (collectives it runs
        on some steps only): a rank that joined has none yet."""

    # ---- state shared with the trainer ------------------------------------------------------
    @property
    def epoch_num(self) -> int:
        return self.trainer.epoch_num

    @property
    def global_step(self) -> int:
        return self.trainer.global_step

    @property
    def local_step(self) -> int:
        return self.trainer.local_step

    @property
    def chief_only(self) -> bool:
        return self._chief_only

    @chief_only.setter
    def chief_only(self, value: bool) -> None:
        self._chief_only = bool(value)

    def set_chief_only(self, value: bool = True) -> Callback:
        """Set whether this callback runs only on the chief; returns self for chaining."""
        self._chief_only = bool(value)
        return self

    # ---- helpers for subclasses --------------------------------------------------------------
    def get_tensors_maybe_in_tower(self, names) -> list:
        """Tensors by name: in the graph as named, else in the first training tower (so that
        ``"cost"`` finds ``tower0/cost`` of a multi-tower trainer).

        Raises:
            KeyError: a name is found in neither.
        """
        return [self._tensor_maybe_in_tower(n) for n in names]

    def _tensor_maybe_in_tower(self, name: str):
        try:
            return get_tensors_by_names([name])[0]
        except (KeyError, ValueError):
            pass
        tower_func = self.trainer.tower_func if self.trainer is not None else None
        training = tower_func.towers.training() if tower_func is not None else []
        if len(training):
            try:
                return training[0].get_tensor(name)
            except KeyError:
                pass
        where = f" or in tower '{training[0].ns_name}'" if len(training) and training[0].ns_name else ""
        raise KeyError(f"{self}: no tensor named {get_op_tensor_name(name)[1]!r} in the graph{where}")

    # ---- what the trainer asks once, after setup_graph --------------------------------------
    def _takes_part_in_runs(self) -> bool:
        """Whether ``before_run``/``after_run`` must be called around hooked runs.

        By default: whether the class overrides them. A callback that decides in ``_setup_graph``
        that it has nothing to fetch (e.g. an empty collection) returns False, so the training
        step does not pay for calling it.
        """
        return _overrides(self, "before_run", "_before_run") or self._uses_after_run()

    def _uses_after_run(self) -> bool:
        """Whether ``after_run`` does anything (else the trainer does not call it)."""
        return _overrides(self, "after_run", "_after_run")

    def _uses_trigger_step(self) -> bool:
        """Whether ``trigger_step`` does anything (else the trainer does not call it)."""
        return _overrides(self, "trigger_step", "_trigger_step")

    def _resolve_fetches(self, fetches):
        """Turn tensor/op names into graph elements; lists, tuples and dicts keep their shape."""
        if isinstance(fetches, dict):
            return {k: self._resolve_fetches(v) for k, v in fetches.items()}
        if isinstance(fetches, (list, tuple)):
            return type(fetches)(self._resolve_fetches(f) for f in fetches)
        if isinstance(fetches, str):
            name = fetches if ":" in fetches else _name_to_element(self.graph, fetches)
            return self.graph.as_graph_element(name)
        return fetches

    def __str__(self) -> str:
        return type(self).__name__


_RUN_METHODS = ("before_run", "_before_run", "after_run", "_after_run")


def _overrides(cb: Callback, *names: str, base: type | None = None) -> bool:
    """Whether the callback's class (or the instance) replaces any of these methods of ``base``
    (default: Callback)."""
    base = base or Callback
    cls = type(cb)
    return any(getattr(cls, n) is not getattr(base, n) or n in vars(cb) for n in names)


def _name_to_element(graph, name: str) -> str:
    """A bare name means the op's first output if it has one, else the op itself."""
    op = graph.get_operation_by_name(name)
    return op.outputs[0].name if op.outputs else op.name


class ProxyCallback(Callback):
    """A callback that forwards every call to another callback (subclass it to change one call)."""

    def __init__(self, cb: Callback):
        if not isinstance(cb, Callback):
            raise TypeError(f"ProxyCallback wraps a Callback, got {type(cb).__name__}")
        self.cb = cb
        self._chief_only = cb.chief_only

    def setup_graph(self, trainer) -> None:
        self.trainer = trainer
        self.graph = tfv1.get_default_graph()
        self.cb.setup_graph(trainer)

    def _before_train(self):
        self.cb.before_train()

    def _before_epoch(self):
        self.cb.before_epoch()

    def _after_epoch(self):
        self.cb.after_epoch()

    def before_run(self, ctx):
        return self.cb.before_run(ctx)

    def _after_run(self, run_context, run_values):
        self.cb.after_run(run_context, run_values)

    def _trigger_step(self):
        self.cb.trigger_step()

    def _trigger_epoch(self):
        self.cb.trigger_epoch()

    def _trigger(self):
        self.cb.trigger()

    def _after_train(self):
        self.cb.after_train()

    def _regrouped(self):
        self.cb.regrouped()

    # A proxy takes part in runs when the wrapped callback does, or when a subclass of the proxy
    # changes the run methods itself.
    def _takes_part_in_runs(self) -> bool:
        return self.cb._takes_part_in_runs() or _overrides(self, *_RUN_METHODS, base=_proxy_base(self))

    def _uses_after_run(self) -> bool:
        own = _overrides(self, "after_run", "_after_run", base=_proxy_base(self))
        return self.cb._uses_after_run() or own

    def __str__(self) -> str:
        return f"{type(self).__name__}({self.cb})"


def _proxy_base(proxy: ProxyCallback) -> type:
    """The class whose run methods only forward: ProxyCallback, or a library proxy that gates."""
    return getattr(proxy, "_FORWARDING_BASE", ProxyCallback)


class CallbackFactory(Callback):
    """A callback made of plain functions; each receives the callback itself as its argument."""

    def __init__(self, setup_graph=None, before_train=None, trigger=None, after_train=None):
        self._cb_setup_graph = setup_graph
        self._cb_before_train = before_train
        self._cb_trigger = trigger
        self._cb_after_train = after_train

    def _setup_graph(self):
        if self._cb_setup_graph:
            self._cb_setup_graph(self)

    def _before_train(self):
        if self._cb_before_train:
            self._cb_before_train(self)

    def _trigger(self):
        if self._cb_trigger:
            self._cb_trigger(self)

    def _after_train(self):
        if self._cb_after_train:
            self._cb_after_train(self)
