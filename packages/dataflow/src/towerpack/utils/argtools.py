"""Decorators and argument helpers: memoization, ``map_arg``, ``call_only_once``, ``shape2d``/``shape4d``,
``log_once``.

Memoized functions keep their arguments and results alive for the life of the process (or of the
object, for ``memoized_method``). ``graph_memoized`` keeps one cache per TensorFlow graph; it uses
the TensorFlow the process has imported and never imports it itself.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "graph_memoized",
    "log_once",
    "map_arg",
    "memoized",
    "memoized_ignoreargs",
    "memoized_method",
    "shape2d",
    "shape4d",
]


def map_arg(**maps: Callable[[Any], Any]) -> Callable:
    """A decorator applying ``maps[name]`` to argument ``name`` (however it is passed) before the call.

    ``@map_arg(shape=shape2d) def f(x, shape): ...`` makes ``f(x, 3)`` call ``f(x, [3, 3])``.
    """

    def deco(func: Callable) -> Callable:
        sig = inspect.signature(func)
        unknown = sorted(set(maps) - set(sig.parameters))
        if unknown:
            raise TypeError(f"map_arg: {func.__qualname__} has no argument(s) {', '.join(unknown)}")

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            bound = sig.bind(*args, **kwargs)
            for name, fn in maps.items():
                if name in bound.arguments:
                    bound.arguments[name] = fn(bound.arguments[name])
            return func(*bound.args, **bound.kwargs)

        return wrapper

    return deco


#: ``functools.lru_cache(maxsize=None)``: arguments must be hashable; results are kept forever.
memoized = functools.lru_cache(maxsize=None)


def graph_memoized(func: Callable) -> Callable:
    """Like ``memoized``, with one cache per TensorFlow graph (the default graph at call time).

    For functions that create graph elements, such as a shared placeholder; the graphs seen stay
    alive. Needs a process that has imported TensorFlow.
    """
    per_graph = memoized(lambda graph, args, kwargs: func(*args, **dict(kwargs)))

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return per_graph(_default_graph(func), args, tuple(sorted(kwargs.items())))

    return wrapper


def _default_graph(func: Callable) -> Any:
    tf = sys.modules.get("tensorflow")
    if tf is None:
        raise RuntimeError(
            f"{func.__qualname__} is graph_memoized: it needs TensorFlow, which this process has not imported"
        )
    return tf.compat.v1.get_default_graph()


_IGNOREARGS_RESULTS: dict[Callable, Any] = {}


def memoized_ignoreargs(func: Callable) -> Callable:
    """Run ``func`` on the first call only; every later call returns that result, whatever its arguments."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if func not in _IGNOREARGS_RESULTS:
            _IGNOREARGS_RESULTS[func] = func(*args, **kwargs)
        return _IGNOREARGS_RESULTS[func]

    return wrapper


def memoized_method(func: Callable) -> Callable:
    """Memoize a method per object: the cache lives on the object (``_MEMOIZED_CACHE``).

    Calls are told apart by all their argument values, positional or keyword, defaults filled in
    (the reference looked only at keyword names, so ``f(name='a')`` and ``f(name='b')`` shared a
    result; it also never cached ``None``, which is cached here like any result).
    """
    sig = inspect.signature(func)

    @functools.wraps(func)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = sig.bind(self, *args, **kwargs)
        bound.apply_defaults()
        key = (func, *list(bound.arguments.items())[1:])
        cache = self.__dict__.setdefault("_MEMOIZED_CACHE", {})
        if key not in cache:
            cache[key] = func(self, *args, **kwargs)
        return cache[key]

    return wrapper


def call_only_once(func: Callable) -> Callable:
    """A method (or property setter) that may run once per object; a second call is a RuntimeError."""

    @functools.wraps(func)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        done = self.__dict__.setdefault("_CALL_ONLY_ONCE_CACHE", set())
        if func in done:
            raise RuntimeError(f"{type(self).__name__}.{func.__name__} can only be called once per object")
        done.add(func)
        return func(self, *args, **kwargs)

    return wrapper


def shape2d(a: Any, name: str = "shape") -> list[int]:
    """``[h, w]`` from an int (a square) or a pair of ints (list, tuple or array).

    Integral numpy values count as ints; anything else is a ``ValueError`` naming ``name``.
    """
    if isinstance(a, numbers.Integral) and not isinstance(a, bool):
        return [int(a), int(a)]
    if isinstance(a, (list, tuple, np.ndarray)) and len(a) == 2:
        try:
            h, w = (int(v) for v in a)
            if h == a[0] and w == a[1]:
                return [h, w]
        except (TypeError, ValueError):
            pass
    raise ValueError(f"{name} must be an int or a pair of ints (h, w), got {a!r}")


_KERAS_FORMAT = {"NCHW": "channels_first", "NHWC": "channels_last"}
_TF_FORMAT = {v: k for k, v in _KERAS_FORMAT.items()}


def get_data_format(data_format: str, keras_mode: bool = True) -> str:
    """``data_format`` in Keras' words (``channels_last``) or, with ``keras_mode=False``, in
    TensorFlow's (``NHWC``); either spelling is accepted."""
    table = _KERAS_FORMAT if keras_mode else _TF_FORMAT
    result = table.get(data_format, data_format)
    if result not in table.values():
        raise ValueError(
            f"unknown data_format {data_format!r}; use NHWC, NCHW, channels_last or channels_first"
        )
    return result


def shape4d(a: Any, data_format: str = "NHWC") -> list[int]:
    """``[1, h, w, 1]`` (NHWC) or ``[1, 1, h, w]`` (NCHW) from what ``shape2d`` takes."""
    h, w = shape2d(a)
    if get_data_format(data_format, keras_mode=False) == "NHWC":
        return [1, h, w, 1]
    return [1, 1, h, w]


@memoized
def log_once(message: str, func: str = "info") -> None:
    """Log ``message`` with the towerpack logger's method ``func`` (``"warn"``, ``"error"``, ...)
    the first time this pair is seen; later calls do nothing."""
    from . import logger

    getattr(logger, func)(message)
