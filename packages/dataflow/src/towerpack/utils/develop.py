"""Helpers for library code: stand-ins for names whose optional dependency is missing, deprecation
warnings, and a module that loads on first use."""

from __future__ import annotations

import datetime
import functools
import importlib
import os
import sys
import types
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from . import logger

__all__: list[str] = []


def _missing(dependency: str | Sequence[str], what: str) -> str:
    if not isinstance(dependency, str):
        dependency = ",".join(dependency)
    return f"Cannot import '{dependency}', therefore '{what}' is not available"


def create_dummy_class(klass: str, dependency: str | Sequence[str]) -> type:
    """A class standing for ``klass`` when ``dependency`` cannot be imported: making one raises
    ImportError, reading a class attribute raises AttributeError, both naming the dependency."""
    message = _missing(dependency, klass)

    class _MissingMeta(type):
        def __getattr__(cls, name: str) -> Any:
            raise AttributeError(message)

    class _Missing(metaclass=_MissingMeta):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise ImportError(message)

    _Missing.__name__ = _Missing.__qualname__ = klass
    return _Missing


def create_dummy_func(func: str, dependency: str | Sequence[str]) -> Callable[..., Any]:
    """A function standing for ``func`` when ``dependency`` (a name or a list) cannot be imported:
    calling it raises ImportError naming the dependency."""
    message = _missing(dependency, func)

    def _missing_func(*args: Any, **kwargs: Any) -> Any:
        raise ImportError(message)

    _missing_func.__name__ = _missing_func.__qualname__ = func
    return _missing_func


def building_rtfd() -> bool:
    """Whether documentation is being built (``READTHEDOCS=True`` or ``DOC_BUILDING`` set)."""
    return os.environ.get("READTHEDOCS") == "True" or bool(os.environ.get("DOC_BUILDING"))


_DEPRECATION_COUNTS: defaultdict[str, int] = defaultdict(int)


def log_deprecated(
    name: str = "", text: str = "", eos: str = "", max_num_warnings: int | None = None
) -> None:
    """Warn (``[Deprecated] ...``) that ``name`` is or will be deprecated.

    Args:
        name: what is deprecated.
        text: what to do instead.
        eos: when support ends, ``YYYY-MM-DD``.
        max_num_warnings: warn at most this many times per message in this process.
    """
    if not (name or text):
        raise ValueError("log_deprecated needs a name or a text")
    if eos:
        eos = "after " + datetime.date.fromisoformat(eos).strftime("%d %b")
    if name:
        message = f"{name} will be deprecated {eos}. {text}" if eos else f"{name} was deprecated. {text}"
    else:
        message = text + (f" Legacy period ends {eos}" if eos else "")
    if max_num_warnings is not None:
        if _DEPRECATION_COUNTS[message] >= max_num_warnings:
            return
        _DEPRECATION_COUNTS[message] += 1
    logger.warning("[Deprecated] %s", message.strip())


def deprecated(text: str = "", eos: str = "", max_num_warnings: int | None = None) -> Callable:
    """A decorator: each call of the function first warns (``log_deprecated``) that it is deprecated,
    naming the function and the file and line of the call."""

    def deco(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1)
            where = f"{caller.f_code.co_filename}:{caller.f_lineno}"
            log_deprecated(f"{func.__name__} [{where}]", text, eos, max_num_warnings=max_num_warnings)
            return func(*args, **kwargs)

        return wrapper

    return deco


def HIDE_DOC(func: Callable) -> Callable:
    """Mark ``func`` as hidden from the API documentation."""
    func.__HIDE_SPHINX_DOC__ = True
    return func


class LazyLoader(types.ModuleType):
    """A module object that imports module ``name`` on first use and then stands for it.

    ``imgaug = LazyLoader('imgaug', globals(), 'pkg.imgaug')``: the first attribute access imports
    ``pkg.imgaug`` and puts the real module into ``parent_module_globals[local_name]``.
    """

    def __init__(self, local_name: str, parent_module_globals: dict[str, Any], name: str) -> None:
        super().__init__(name)
        self._local_name = local_name
        self._parent_module_globals = parent_module_globals

    def _load(self) -> types.ModuleType:
        module = importlib.import_module(self.__name__)
        self._parent_module_globals[self._local_name] = module
        self.__dict__.update(module.__dict__)
        return module

    def __getattr__(self, item: str) -> Any:
        return getattr(self._load(), item)

    def __dir__(self) -> list[str]:
        return dir(self._load())
