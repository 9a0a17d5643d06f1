"""Layer registration: what turns a function into a tensorpack-style layer.

A registered layer is called as ``Layer(name, input, ...)``: it runs in ``variable_scope(name)``
(so its variables are ``<name>/W`` and are reused by towers that reuse variables), takes its
defaults from ``argscope``, accepts the reference's old argument names, and logs the input and
output shapes once per layer. ``LinearWrap`` finds layers here by name.
"""

from __future__ import annotations

import functools

from .. import logger
from ..compat import tf, tfv1
from ..model_utils import get_shape_str
from ..tower import strip_tower_prefix
from .argscope import get_arg_scope
from .layer_args import LayerArgs

__all__ = ["disable_layer_logging", "get_registered_layer", "layer_register", "register_alias"]

_LAYERS: dict[str, object] = {}
_logged_scopes: set[tuple[int, str]] = set()
_logging_enabled = True


def get_registered_layer(name: str):
    """The registered layer called ``name``, or None."""
    return _LAYERS.get(name)


def disable_layer_logging() -> None:
    """Stop logging layer shapes, for the rest of the process."""
    global _logging_enabled
    _logging_enabled = False


def _register(name: str, layer) -> None:
    if name in _LAYERS or name == "tf":
        raise ValueError(f"a layer named {name!r} is registered already")
    _LAYERS[name] = layer


def register_alias(name: str, layer) -> None:
    """Make a registered layer known under a second name as well (for LinearWrap)."""
    _register(name, layer)


def _is_tensor_like(x) -> bool:
    return isinstance(x, (tf.Tensor, tf.Variable)) or hasattr(x, "_as_graph_element")


def _check_inputs(layer_name: str, inputs) -> None:
    if inputs is None:
        raise ValueError(f"{layer_name}: the input is None")
    first = inputs[0] if isinstance(inputs, (list, tuple)) and inputs else inputs
    if not _is_tensor_like(first):
        raise ValueError(
            f"Invalid inputs to layer {layer_name}: expected a tensor (or a list starting with one), "
            f"got {type(inputs).__name__}"
        )


def _shape_of(x) -> str:
    try:
        return get_shape_str(x)
    except TypeError:  # a user's layer may take or return other things (a dict, None ...)
        return f"<{type(x).__name__}>"


def layer_register(log_shape: bool = False, use_scope: bool | None = True):
    """Register a layer function ``func(inputs, ...)`` as a layer.

    Args:
        log_shape: log the input and output shapes (once per layer name; needs ``use_scope``).
        use_scope: True: the first argument is the layer's name and its body runs in
            ``variable_scope(name)``; None: the leading name is optional (a scope is opened only
            when one is given); False: no scope (a leading name is ignored with a warning).
    """
    if log_shape and not use_scope:
        raise ValueError("layer_register(log_shape=True) needs use_scope=True")

    def decorator(func):
        layer_name = func.__name__
        spec = LayerArgs.of(func)

        @functools.wraps(func)
        def layer(*args, **kwargs):
            name, args = _split_name(layer_name, use_scope, args)
            if not args:
                raise TypeError(f"{layer_name}() needs an input tensor")
            inputs, rest = args[0], args[1:]
            _check_inputs(layer_name, inputs)
            scope_kwargs = get_arg_scope().get(layer_name, {})
            if spec is not None:
                call_args, call_kwargs = (), spec.merge(layer_name, rest, scope_kwargs, kwargs)
            else:
                call_args, call_kwargs = rest, {**scope_kwargs, **kwargs}
            if name is None:
                return func(inputs, *call_args, **call_kwargs)
            with tfv1.variable_scope(name) as scope:
                outputs = func(inputs, *call_args, **call_kwargs)
                if log_shape:
                    _log_shapes(scope.name, inputs, outputs)
            return outputs

        layer.__argscope_enabled__ = True
        layer.use_scope = use_scope
        layer.f = func
        _register(layer_name, layer)
        return layer

    return decorator


def _split_name(layer_name: str, use_scope, args: tuple):
    if use_scope:
        if not args or not isinstance(args[0], str):
            raise TypeError(
                f"{layer_name}() takes the layer's name first, e.g. {layer_name}('name', x, ...); "
                "did you forget the name?"
            )
        return args[0], args[1:]
    if args and isinstance(args[0], str):
        if use_scope is None:
            return args[0], args[1:]
        logger.warning("%s does not use a scope; the name %r is ignored", layer_name, args[0])
        return None, args[1:]
    return None, args


def _log_shapes(scope_name: str, inputs, outputs) -> None:
    if not _logging_enabled:
        return
    name = strip_tower_prefix(scope_name)
    key = (id(tfv1.get_default_graph()), name)
    if key in _logged_scopes:
        return
    _logged_scopes.add(key)
    logger.info("%s input: %s", name, _shape_of(inputs))
    logger.info("%s output: %s", name, _shape_of(outputs))
