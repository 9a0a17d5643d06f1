"""LinearWrap: write a chain of layers as one expression.

``LinearWrap(x).Conv2D('conv0', 32, 3).MaxPooling('pool0', 2).FullyConnected('fc', 10)()`` calls
each layer on the previous result. ``.tf.<path>(...)`` calls a TensorFlow function on it,
``.apply(f, ...)`` any function; ``()`` or ``.tensor()`` returns the tensor.

``.tf`` is the TensorFlow 1 API the reference's models were written against (``tf.compat.v1``:
``.tf.image.resize_nearest_neighbor``, ``.tf.nn.dropout(keep_prob)``), with TensorFlow 2's
namespace as the fallback for names only it has.
"""

from __future__ import annotations

from ..compat import tf, tfv1
from .registry import get_registered_layer

__all__ = ["LinearWrap"]


class _TFModuleProxy:
    """``lw.tf.nn.relu(...)`` -> ``LinearWrap(tf.compat.v1.nn.relu(tensor, ...))``.

    ``modules`` are the namespaces searched in order (``tf.compat.v1`` then ``tf``); ``path`` is
    the dotted name so far, for the error message.
    """

    def __init__(self, modules: tuple, tensor, path: str = "tf"):
        self._modules = modules
        self._tensor = tensor
        self._path = path

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        found = tuple(getattr(m, name) for m in self._modules if hasattr(m, name))
        if not found:
            raise AttributeError(f"LinearWrap: TensorFlow has no {self._path}.{name} (in tf.compat.v1 or tf)")
        if callable(found[0]):
            func = found[0]
            return lambda *args, **kwargs: LinearWrap(func(self._tensor, *args, **kwargs))
        return _TFModuleProxy(found, self._tensor, f"{self._path}.{name}")


class LinearWrap:
    """A tensor with every registered layer as a chainable method."""

    def __init__(self, tensor):
        self._t = tensor

    def __getattr__(self, layer_name: str):
        if layer_name.startswith("__"):
            raise AttributeError(layer_name)
        layer = get_registered_layer(layer_name)
        if layer is None:
            if layer_name == "tf":
                return _TFModuleProxy((tfv1, tf), self._t)
            raise AttributeError(
                f"LinearWrap has no layer {layer_name!r}: register it with @layer_register, or use "
                ".apply(func, ...) / .tf.<function>(...)"
            )
        if layer.use_scope:

            def call_scoped(name, *args, **kwargs):
                return LinearWrap(layer(name, self._t, *args, **kwargs))

            return call_scoped

        def call(*args, **kwargs):
            if args and isinstance(args[0], str) and layer.use_scope is None:
                return LinearWrap(layer(args[0], self._t, *args[1:], **kwargs))
            return LinearWrap(layer(self._t, *args, **kwargs))

        return call

    def apply(self, func, *args, **kwargs) -> LinearWrap:
        """``func(tensor, *args, **kwargs)``."""
        return LinearWrap(func(self._t, *args, **kwargs))

    def apply2(self, func, *args, **kwargs) -> LinearWrap:
        """``func(args[0], tensor, *args[1:], **kwargs)``."""
        return LinearWrap(func(args[0], self._t, *args[1:], **kwargs))

    def __call__(self):
        return self._t

    def tensor(self):
        return self._t

    def print_tensor(self) -> LinearWrap:
        print(self._t)
        return self
