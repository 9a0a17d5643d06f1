"""Graph collections saved and put back: what lets a layer or a tower add to UPDATE_OPS or
TRAINABLE_VARIABLES and have only some of its additions kept; and the names of the standard
collection keys, for messages."""

from __future__ import annotations

import contextlib
import functools
import types

from .compat import tfv1

__all__ = [
    "add_to_collection_once",
    "backup_collection",
    "freeze_collection",
    "get_inverse_graphkeys",
    "restore_collection",
]


def add_to_collection_once(key: str, *values) -> None:
    """Append each of ``values`` to the collection ``key`` unless it is there already (by identity)."""
    collection = tfv1.get_collection_ref(key)
    for v in values:
        if all(v is not m for m in collection):
            collection.append(v)


def backup_collection(keys=None) -> dict:
    """``{key: copy of the collection}`` for ``keys`` (default: every collection of the graph)."""
    graph = tfv1.get_default_graph()
    if keys is None:
        keys = graph.get_all_collection_keys()
    elif isinstance(keys, str):
        keys = [keys]
    return {k: list(graph.get_collection(k)) for k in keys}


def restore_collection(backup: dict) -> None:
    """Put the collections of ``backup`` back, in place, as they were."""
    graph = tfv1.get_default_graph()
    for key, items in backup.items():
        graph.get_collection_ref(key)[:] = items


@contextlib.contextmanager
def freeze_collection(keys):
    """Inside, additions to the ``keys`` collections are dropped when the block ends (also when it
    raises)."""
    backup = backup_collection(keys)
    try:
        yield
    finally:
        restore_collection(backup)


@functools.cache
def get_inverse_graphkeys() -> types.MappingProxyType:
    """A read-only map from each standard collection key to its name in code, e.g.
    ``"trainable_variables"`` -> ``"tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES"``."""
    keys = tfv1.GraphKeys
    # VARIABLES is a deprecated alias of GLOBAL_VARIABLES (reading it warns).
    names = [n for n in vars(keys) if n.isupper() and not n.startswith("_") and n != "VARIABLES"]
    return types.MappingProxyType({getattr(keys, n): f"tf.compat.v1.GraphKeys.{n}" for n in sorted(names)})
