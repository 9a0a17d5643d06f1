"""LinearWrap: write a chain of layers as one expression.

``LinearWrap(x).Conv2D('conv0', 32, 3).MaxPooling('pool0', 2).FullyConnected('fc', 10)()`` calls
each layer on the previous result. ``.tf.<path>(...)`` calls a TensorFlow function on it,
``.apply(f, ...)`` any function; ``()`` or ``.tensor()`` returns the tensor.
"""

from __future__ import annotations

import tensorflow

from .registry import get_registered_layer

__all__ = ["LinearWrap"]


class _TFModuleProxy:
    """``lw.tf.nn.relu(...)`` -> ``LinearWrap(tensorflow.nn.relu(tensor, ...))``."""

    def __init__(self, module, tensor):
        self._module = module
        self._tensor = tensor

    def __getattr__(self, name: str):
        attr = getattr(self._module, name)
        if callable(attr):
            return lambda *args, **kwargs: LinearWrap(attr(self._tensor, *args, **kwargs))
        return _TFModuleProxy(attr, self._tensor)


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
                return _TFModuleProxy(tensorflow, self._t)
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
