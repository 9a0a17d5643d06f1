"""Towers: one replica of the model in the graph, built by calling a tower function under a context.

A tower function takes input tensors and adds one replica of the model to the graph. It may be
called many times (once per training device, once more per predictor), always under a
``TowerContext`` that says whether it trains, which name scope its ops live in and which
variable scope its variables come from. Rules for tower functions:

- create variables with ``tf.compat.v1.get_variable`` so replicas can reuse them;
- put only variables trained by gradient descent in TRAINABLE_VARIABLES;
- do not depend on the name scope for variable names, and do not name anything "tower".
"""

from __future__ import annotations

import contextlib
import re

from towerpack.utils.naming import MOVING_SUMMARY_OPS_KEY

from .compat import tf, tfv1

__all__ = [
    "MOVING_SUMMARY_OPS",
    "BaseTowerContext",
    "PredictTowerContext",
    "TowerContext",
    "TowerFunc",
    "TowerFuncWrapper",
    "TowerTensorHandle",
    "TowerTensorHandles",
    "TrainTowerContext",
    "get_current_tower_context",
    "in_main_training_tower",
    "strip_tower_prefix",
]

# Collection of the ops that update moving-average summaries (see towerpack.trainer.summary).
MOVING_SUMMARY_OPS = MOVING_SUMMARY_OPS_KEY

_CURRENT: BaseTowerContext | None = None
_TOWER_PREFIX = re.compile(r"^tower\d+/")


def strip_tower_prefix(name: str) -> str:
    """``tower3/conv0/W`` -> ``conv0/W``: a name as the main tower (or a single tower) has it."""
    return _TOWER_PREFIX.sub("", name)


def get_current_tower_context() -> BaseTowerContext | None:
    """The TowerContext being built, or None outside any tower."""
    return _CURRENT


def in_main_training_tower() -> bool:
    """Whether what is being built is built once: outside any tower, or in the main training tower."""
    return _CURRENT is None or _CURRENT.is_main_training_tower


class BaseTowerContext:
    """What a tower function can ask about the replica it builds."""

    is_training: bool = False
    # Collections whose additions are dropped when the tower closes (see ``_frozen_keys``).
    _FROZEN_NON_MAIN = (tfv1.GraphKeys.SUMMARIES, MOVING_SUMMARY_OPS)

    def __init__(self, ns_name: str, vs_name: str = ""):
        self._ns_name = ns_name
        self._vs_name = vs_name
        self._added: dict[str, list] | None = None
        self._stack: contextlib.ExitStack | None = None

    @property
    def ns_name(self) -> str:
        """The name scope of the tower's ops."""
        return self._ns_name

    name = ns_name

    @property
    def vs_name(self) -> str:
        """The variable scope the tower's variables live in ('' = the root scope)."""
        return self._vs_name

    @property
    def is_main_training_tower(self) -> bool:
        return False

    @property
    def has_own_variables(self) -> bool:
        """Whether this tower creates variables (rather than reusing another tower's)."""
        raise NotImplementedError

    def _frozen_keys(self) -> tuple[str, ...]:
        return ()

    def _scopes(self) -> list:
        raise NotImplementedError

    def get_collection_in_tower(self, key: str) -> list:
        """The items this tower added to a graph collection (also those it was not allowed to keep)."""
        if self._added is not None:
            return list(self._added.get(key, []))
        if self._stack is None:
            raise RuntimeError("get_collection_in_tower() is only available inside or after the tower")
        before = {id(x) for x in self._before.get(key, [])}
        return [x for x in self._graph.get_collection(key) if id(x) not in before]

    def __enter__(self):
        global _CURRENT
        if _CURRENT is not None:
            raise RuntimeError(
                f"TowerContext '{self._ns_name}' cannot be nested inside TowerContext '{_CURRENT.ns_name}'"
            )
        self._graph = tfv1.get_default_graph()
        stack = contextlib.ExitStack()
        for scope in self._scopes():
            stack.enter_context(scope)
        current_ns = self._graph.get_name_scope()
        if current_ns != self._ns_name:
            stack.close()
            raise RuntimeError(
                f"TowerContext '{self._ns_name}' ended up in name scope '{current_ns}'; "
                "open towers outside of any name scope"
            )
        self._stack = stack
        self._before = {k: list(self._graph.get_collection(k)) for k in self._graph.get_all_collection_keys()}
        _CURRENT = self
        return self

    def __exit__(self, exc_type, exc, tb):
        global _CURRENT
        _CURRENT = None
        try:
            added = {}
            for key in self._graph.get_all_collection_keys():
                before = {id(x) for x in self._before.get(key, [])}
                new = [x for x in self._graph.get_collection(key) if id(x) not in before]
                if new:
                    added[key] = new
            self._added = added
            for key in self._frozen_keys():
                if key in added:
                    ref = self._graph.get_collection_ref(key)
                    ref[:] = [x for x in ref if id(x) not in {id(n) for n in added[key]}]
            if exc_type is None and not self.has_own_variables:
                new_vars = added.get(tfv1.GraphKeys.TRAINABLE_VARIABLES, [])
                if new_vars:
                    names = ", ".join(v.name for v in new_vars)
                    raise RuntimeError(
                        f"tower '{self._ns_name}' reuses variables but created new trainable variable(s): "
                        f"{names}. Create variables with tf.compat.v1.get_variable so they are reused "
                        "(call a Keras model through towerpack.trainer.keras.KerasModelCaller)."
                    )
        finally:
            self._stack.close()
        return False

    def __str__(self) -> str:
        return f"{type(self).__name__}(ns_name={self._ns_name!r}, vs_name={self._vs_name!r})"


def _name_scope(ns_name: str):
    # A trailing "/" re-enters the scope by its exact name instead of making a unique one.
    return tfv1.name_scope(ns_name + "/" if ns_name else None)


class TrainTowerContext(BaseTowerContext):
    """Context of a training tower: ``index`` among ``total`` data-parallel replicas."""

    is_training = True

    def __init__(self, ns_name: str, vs_name: str = "", index: int = 0, total: int = 1):
        super().__init__(ns_name, vs_name)
        if not 0 <= index < total:
            raise ValueError(f"tower index {index} is not in [0, {total})")
        self.index = index
        self.total = total
        self._reuse = False

    @property
    def is_main_training_tower(self) -> bool:
        return self.index == 0

    @property
    def has_own_variables(self) -> bool:
        return (self.index == 0 or bool(self._vs_name)) and not self._reuse

    def _frozen_keys(self):
        return () if self.index == 0 else self._FROZEN_NON_MAIN

    def _scopes(self):
        vs = tfv1.get_variable_scope()
        if vs.name:
            raise RuntimeError(
                f"TrainTowerContext '{self._ns_name}' must not be opened inside variable scope '{vs.name}'"
            )
        self._reuse = bool(vs.reuse)
        scopes = []
        if self._vs_name:
            scopes.append(tfv1.variable_scope(self._vs_name))
        elif self.index > 0:
            scopes.append(tfv1.variable_scope(vs, reuse=True))
        scopes.append(_name_scope(self._ns_name))
        return scopes


class PredictTowerContext(BaseTowerContext):
    """Context of an inference tower; it reuses variables when opened under a reusing variable scope."""

    is_training = False

    def __init__(self, ns_name: str, vs_name: str = ""):
        super().__init__(ns_name, vs_name)
        self._reuse = bool(tfv1.get_variable_scope().reuse)

    @property
    def has_own_variables(self) -> bool:
        return not self._reuse

    def _frozen_keys(self):
        return (*self._FROZEN_NON_MAIN, tfv1.GraphKeys.UPDATE_OPS)

    def _scopes(self):
        self._reuse = bool(tfv1.get_variable_scope().reuse)
        scopes = []
        if self._vs_name:
            scopes.append(tfv1.variable_scope(self._vs_name))
        scopes.append(_name_scope(self._ns_name))
        return scopes


def TowerContext(tower_name: str, is_training: bool, vs_name: str = "") -> BaseTowerContext:
    """A training tower (the main one) or a prediction tower, by ``is_training``."""
    if is_training:
        return TrainTowerContext(tower_name, vs_name=vs_name)
    return PredictTowerContext(tower_name, vs_name=vs_name)


class TowerFunc:
    """A tower function with its input signature; remembers every tower it built.

    Calling it (under a TowerContext) builds a tower and records a ``TowerTensorHandle``, so
    tensors of any tower can be found by name afterwards through ``towers``.
    """

    def __init__(self, tower_fn, input_signature):
        if isinstance(tower_fn, TowerFunc):
            tower_fn = tower_fn.tower_fn
        if not callable(tower_fn):
            raise TypeError(f"tower function must be callable, got {type(tower_fn).__name__}")
        self.tower_fn = tower_fn
        self._input_signature = list(input_signature)
        for spec in self._input_signature:
            if not isinstance(spec, tf.TensorSpec):
                raise TypeError(f"input signature items must be tf.TensorSpec, got {spec!r}")
        self._handles: list[TowerTensorHandle] = []

    def __call__(self, *args):
        ctx = get_current_tower_context()
        if ctx is None:
            raise RuntimeError("a tower function must be called under a TowerContext")
        if len(args) != len(self._input_signature):
            raise TypeError(
                f"tower function takes {len(self._input_signature)} inputs "
                f"({[s.name for s in self._input_signature]}), got {len(args)}"
            )
        outputs = self.tower_fn(*args)
        self._handles.append(TowerTensorHandle(ctx, list(args), outputs, self._input_signature))
        return outputs

    @property
    def input_signature(self) -> list:
        return list(self._input_signature)

    @property
    def towers(self) -> TowerTensorHandles:
        return TowerTensorHandles(self._handles)


TowerFuncWrapper = TowerFunc


class TowerTensorHandle:
    """Access to the tensors, variables and collections of one built tower."""

    def __init__(self, ctx: BaseTowerContext, inputs: list, outputs, input_signature: list):
        self._ctx = ctx
        self._graph = tfv1.get_default_graph()
        self._inputs = inputs
        self._outputs = outputs
        self._input_by_name = {spec.name: t for spec, t in zip(input_signature, inputs, strict=True)}

    @property
    def ns_name(self) -> str:
        return self._ctx.ns_name

    @property
    def vs_name(self) -> str:
        return self._ctx.vs_name

    @property
    def is_training(self) -> bool:
        return self._ctx.is_training

    @property
    def inputs(self) -> list:
        return list(self._inputs)

    @property
    def outputs(self):
        return self._outputs

    def get_tensor(self, name: str):
        """A tensor by name: an input of the signature, ``<ns>/<name>``, or a variable ``<vs>/<name>``."""
        base = name[:-2] if name.endswith(":0") else name
        if base in self._input_by_name:
            return self._input_by_name[base]
        full = name if ":" in name else name + ":0"
        prefixed = f"{self.ns_name}/{full}" if self.ns_name else full
        for candidate in (prefixed, full) if self.ns_name else (prefixed,):
            try:
                return self._graph.get_tensor_by_name(candidate)
            except (KeyError, ValueError):
                pass
        var = self._find_variable(base)
        if var is not None:
            return var
        raise KeyError(f"tower '{self.ns_name}' has no tensor named {name!r} (looked for {prefixed!r})")

    def get_tensors(self, names) -> list:
        return [self.get_tensor(n) for n in names]

    def _find_variable(self, name: str):
        full = f"{self.vs_name}/{name}" if self.vs_name else name
        for v in self._graph.get_collection(tfv1.GraphKeys.GLOBAL_VARIABLES):
            if v.op.name == full:
                return v
        return None

    def get_variable(self, name: str):
        var = self._find_variable(name)
        if var is None:
            raise KeyError(f"tower '{self.ns_name}' has no variable {name!r} in scope '{self.vs_name}'")
        return var

    def get_variables(self, names) -> list:
        return [self.get_variable(n) for n in names]

    def get_collection(self, key: str) -> list:
        """Items the tower added to a collection (including ones it was not allowed to keep)."""
        return self._ctx.get_collection_in_tower(key)


class TowerTensorHandles:
    """The towers built by a TowerFunc; index by position or by name scope."""

    def __init__(self, handles: list[TowerTensorHandle]):
        self._handles = list(handles)
        self._by_name = {h.ns_name: h for h in self._handles}

    def __len__(self) -> int:
        return len(self._handles)

    def __iter__(self):
        return iter(self._handles)

    def __getitem__(self, key):
        if isinstance(key, int):
            return self._handles[key]
        if key not in self._by_name:
            raise KeyError(f"no tower named {key!r}; towers: {list(self._by_name)}")
        return self._by_name[key]

    def training(self) -> TowerTensorHandles:
        return TowerTensorHandles([h for h in self._handles if h.is_training])

    def inference(self) -> TowerTensorHandles:
        return TowerTensorHandles([h for h in self._handles if not h.is_training])
