"""Decorators and contexts that put graph-building code under a name or variable scope.

``auto_reuse_variable_scope`` lets a function that creates variables be called again in the same
variable scope (the second call reuses them); ``under_name_scope`` / ``under_variable_scope`` run
a function under a scope named after it; ``cached_name_scope`` re-enters one name scope instead
of making ``name_1``, ``name_2``, ... on every use.
"""

from __future__ import annotations

import contextlib
import functools
import weakref

from . import logger
from .compat import tfv1

__all__ = ["auto_reuse_variable_scope", "cached_name_scope", "under_name_scope", "under_variable_scope"]

# graph -> {full name asked for: the name scope made for it}
_CACHED_NS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def auto_reuse_variable_scope(func):
    """Decorator: the first call in a variable scope creates variables, later calls in the same
    scope (and graph) reuse them, without opening a new name scope.

    Example::

        @auto_reuse_variable_scope
        def head(x):
            return tf.matmul(x, tfv1.get_variable("W", [10, 10]))

        with tfv1.variable_scope("h"):
            head(a)
            head(b)  # shares h/W
    """
    used: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        scope = tfv1.get_variable_scope()
        names = used.setdefault(tfv1.get_default_graph(), set())
        if scope.name in names:
            with tfv1.variable_scope(scope, reuse=True, auxiliary_name_scope=False):
                return func(*args, **kwargs)
        names.add(scope.name)
        return func(*args, **kwargs)

    return wrapper


def under_name_scope(name_scope: str | None = None):
    """Decorator factory: run the function under a name scope.

    The scope is the call's ``name_scope=`` keyword if given (taken out of the keywords),
    else ``name_scope`` given here, else the function's name. Without the keyword each call
    opens a new, uniquified scope (``f``, ``f_1``, ...); with it the call re-enters that scope
    under the current one (``cached_name_scope(..., top_level=False)``) and warns when the scope
    it gets is not the one asked for.
    """

    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            given = "name_scope" in kwargs
            scope_name = kwargs.pop("name_scope", name_scope) or func.__name__
            if not given:
                with tfv1.name_scope(scope_name):
                    return func(*args, **kwargs)
            with cached_name_scope(scope_name, top_level=False) as scope:
                actual = scope.rstrip("/")
                if not actual.endswith(scope_name):
                    logger.warning(
                        "Calling %s with name_scope=%r, but the name scope became %r: the name may be "
                        "taken by another op",
                        func.__name__,
                        scope_name,
                        actual,
                    )
                return func(*args, **kwargs)

        return wrapper

    return decorator


def under_variable_scope():
    """Decorator factory: run the function under a variable scope named after it (which also
    opens a name scope of that name)."""

    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with tfv1.variable_scope(func.__name__):
                return func(*args, **kwargs)

        return wrapper

    return decorator


@contextlib.contextmanager
def cached_name_scope(name: str, top_level: bool = True):
    """Enter the name scope ``name``, the same one every time in a graph: it is created once (at
    the root when ``top_level``, else under the current name scope) and re-entered afterwards.
    Yields the scope's full name (with its trailing ``/``)."""
    graph = tfv1.get_default_graph()
    if not top_level:
        current = graph.get_name_scope()
        if current:
            name = f"{current}/{name}"
    cache = _CACHED_NS.setdefault(graph, {})
    if name not in cache:
        with tfv1.name_scope(None), tfv1.name_scope(name) as scope:
            cache[name] = scope
    with tfv1.name_scope(cache[name]) as scope:
        yield scope
