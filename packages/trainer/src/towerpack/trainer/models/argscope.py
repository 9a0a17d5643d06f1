"""argscope: default arguments for layers, set once for a block of model code.

``with argscope(Conv2D, kernel_size=3, activation=BNReLU): ...`` makes every ``Conv2D`` inside
take those arguments unless the call gives its own. Scopes nest; the inner one wins per key.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect

from .. import logger
from ..tower import in_main_training_tower

__all__ = ["argscope", "enable_argscope_for_function", "enable_argscope_for_module", "get_arg_scope"]

_STACK: list[dict[str, dict]] = []


def get_arg_scope() -> dict[str, dict]:
    """The current defaults: ``{layer name: {argument: value}}``."""
    return _STACK[-1] if _STACK else collections.defaultdict(dict)


def _scope_key(layer) -> str:
    # Aliases (Deconv2D) are the same function object and share its entry.
    return layer.__name__


@contextlib.contextmanager
def argscope(layers, **kwargs):
    """Give ``layers`` (one layer or a list) these default arguments inside the block."""
    if not isinstance(layers, (list, tuple)):
        layers = [layers]
    for layer in layers:
        if not getattr(layer, "__argscope_enabled__", False):
            raise TypeError(
                f"argscope does not apply to {getattr(layer, '__name__', layer)!r}: it is not a registered "
                "layer (use layer_register, or enable_argscope_for_function)"
            )
    new = collections.defaultdict(dict, {k: dict(v) for k, v in get_arg_scope().items()})
    for layer in layers:
        new[_scope_key(layer)].update(kwargs)
    _STACK.append(new)
    try:
        yield
    finally:
        _STACK.pop()


def enable_argscope_for_function(func, log_shape: bool = True):
    """A version of ``func`` that takes defaults from ``argscope`` (keyed by its ``__name__``) and,
    with ``log_shape``, logs ``'name': in --> out`` shapes in the main tower."""
    name = func.__name__

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        merged = {**get_arg_scope().get(name, {}), **kwargs}
        out = func(*args, **merged)
        if log_shape and in_main_training_tower():
            first_in = args[0] if args else next(iter(kwargs.values()), None)
            first_out = out[0] if isinstance(out, (list, tuple)) else out
            shapes = [getattr(t, "shape", "?") for t in (first_in, first_out)]
            label = merged.get("name", name)
            logger.info("%r: %s --> %s", label, *shapes)
        return out

    wrapped.__argscope_enabled__ = True
    return wrapped


def enable_argscope_for_module(module, log_shape: bool = True) -> None:
    """Make every function of ``module`` (e.g. ``tf.compat.v1.layers``) honour argscope, in place."""
    for attr, obj in inspect.getmembers(module):
        if inspect.isfunction(obj):
            setattr(module, attr, enable_argscope_for_function(obj, log_shape=log_shape))
