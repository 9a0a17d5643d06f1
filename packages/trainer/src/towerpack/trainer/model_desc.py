"""ModelDesc: a model described by its inputs, its tower function and its optimizer."""

from __future__ import annotations

import functools

from . import logger
from .compat import tf, tfv1
from .models.regularize import regularize_cost_from_collection
from .tower import get_current_tower_context

__all__ = ["InputDesc", "ModelDesc", "ModelDescBase", "build_placeholders"]

_BAD_NAME_CHARS = (":", "/", " ")


def InputDesc(type, shape, name: str) -> tf.TensorSpec:
    """The older form of a model input: ``tf.TensorSpec(shape, type, name)``."""
    return tf.TensorSpec(shape, type, name)


class ModelDescBase:
    """A model without training: its input signature and the graph it builds.

    Subclasses implement ``inputs()`` (a list of ``tf.TensorSpec`` with unique names) and
    ``build_graph(*input_tensors)``; inside ``build_graph`` a model reads ``self.training``.
    Outside any tower ``training`` is False (the reference raised AttributeError on None there).
    The older forms work too: ``_get_inputs()`` returning ``InputDesc``s, and
    ``_build_graph(inputs)`` taking a list and setting ``self.cost`` instead of returning it (in
    training, REGULARIZATION_LOSSES are then added to that cost, as the reference did).
    """

    @functools.cached_property
    def _input_signature(self) -> list:
        # A throw-away graph, so placeholders created by an old-style inputs() do not leak.
        with tf.Graph().as_default():
            return _check_signature(_as_signature(self.inputs()))

    def get_input_signature(self) -> list:
        """``inputs()`` as a list of named ``tf.TensorSpec`` (computed once)."""
        return list(self._input_signature)

    def get_inputs_desc(self) -> list:
        """The older name of ``get_input_signature()``."""
        return self.get_input_signature()

    @property
    def input_names(self) -> list[str]:
        """The names of the inputs, in order."""
        return [spec.name for spec in self._input_signature]

    @property
    def training(self) -> bool:
        """Whether the tower being built trains: the current TowerContext's ``is_training``."""
        ctx = get_current_tower_context()
        return ctx is not None and ctx.is_training

    def inputs(self) -> list:
        """The model's inputs: a list of ``tf.TensorSpec`` (placeholders are accepted too)."""
        return self._get_inputs()

    def _get_inputs(self) -> list:
        raise NotImplementedError(f"{type(self).__name__} must implement inputs()")

    def build_graph(self, *inputs):
        """The tower function: build the model from input tensors (in the order of ``inputs()``)."""
        self.__dict__.pop("cost", None)  # so a cost left by an earlier tower is never returned
        ret = self._build_graph(list(inputs))
        return self._cost_attribute() if ret is None else ret

    def _build_graph(self, inputs: list):
        raise NotImplementedError(f"{type(self).__name__} must implement build_graph()")

    def _cost_attribute(self):
        """``self.cost`` set by an older-style ``_build_graph``, plus the regularization collection."""
        cost = getattr(self, "cost", None)
        if cost is None or not self.training:
            return cost
        reg = regularize_cost_from_collection()
        if reg.op.type == "Const":
            return cost
        logger.warning(
            "%s set self.cost and REGULARIZATION_LOSSES is not empty: adding it to the cost",
            type(self).__name__,
        )
        return tf.add(cost, reg, name="cost_with_regularizer")


class ModelDesc(ModelDescBase):
    """A single-cost model: ``build_graph`` returns the scalar cost to minimize, ``optimizer()``
    returns a ``tf.compat.v1.train.Optimizer``."""

    @functools.cached_property
    def _optimizer(self):
        opt = self.optimizer()
        if not isinstance(opt, tfv1.train.Optimizer):
            raise TypeError(
                f"{type(self).__name__}.optimizer() must return a tf.compat.v1.train.Optimizer "
                f"(graph-mode training), got {type(opt).__name__}"
            )
        return opt

    def get_optimizer(self):
        """``optimizer()``, called once; later calls return the same optimizer."""
        return self._optimizer

    def optimizer(self):
        """The optimizer to minimize the cost with (called once, by ``get_optimizer()``)."""
        return self._get_optimizer()

    def _get_optimizer(self):
        raise NotImplementedError(f"{type(self).__name__} must implement optimizer()")


def _as_signature(items) -> list:
    """Accept TensorSpecs, or placeholders (built in a throw-away graph when created here)."""
    out = []
    for item in items:
        if isinstance(item, tf.TensorSpec):
            out.append(item)
        elif isinstance(item, tf.Tensor) and item.op.type == "Placeholder":
            out.append(tf.TensorSpec(item.shape, item.dtype, name=item.op.name))
        else:
            raise TypeError(f"model inputs must be tf.TensorSpec (or placeholders), got {item!r}")
    return out


def _check_signature(signature: list) -> list:
    names = [spec.name for spec in signature]
    for spec, name in zip(signature, names, strict=True):
        if not name:
            raise ValueError(f"every model input needs a name; {spec} has none")
        if any(c in name for c in _BAD_NAME_CHARS):
            raise ValueError(f"model input name {name!r} must not contain ':', '/' or spaces")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"model input names must be unique; repeated: {dupes}")
    return signature


def build_placeholders(signature) -> list:
    """One placeholder per TensorSpec, named after it, in the default graph."""
    return [tfv1.placeholder(spec.dtype, spec.shape, name=spec.name) for spec in signature]
