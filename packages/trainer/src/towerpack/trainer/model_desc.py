"""ModelDesc: a model described by its inputs, its tower function and its optimizer."""

from __future__ import annotations

import functools

from .compat import tf, tfv1

__all__ = ["ModelDesc", "ModelDescBase", "build_placeholders"]

_BAD_NAME_CHARS = (":", "/", " ")


class ModelDescBase:
    """A model without training: its input signature and the graph it builds.

    Subclasses implement ``inputs()`` (a list of ``tf.TensorSpec`` with unique names) and
    ``build_graph(*input_tensors)``.
    """

    @functools.cached_property
    def _input_signature(self) -> list:
        # A throw-away graph, so placeholders created by an old-style inputs() do not leak.
        with tf.Graph().as_default():
            return _check_signature(_as_signature(self.inputs()))

    def get_input_signature(self) -> list:
        """``inputs()`` as a list of named ``tf.TensorSpec`` (computed once)."""
        return list(self._input_signature)

    @property
    def input_names(self) -> list[str]:
        return [spec.name for spec in self._input_signature]

    def inputs(self) -> list:
        """The model's inputs: a list of ``tf.TensorSpec`` (placeholders are accepted too)."""
        raise NotImplementedError(f"{type(self).__name__} must implement inputs()")

    def build_graph(self, *inputs):
        """The tower function: build the model from input tensors (in the order of ``inputs()``)."""
        raise NotImplementedError(f"{type(self).__name__} must implement build_graph()")


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
