"""Position keys: how an item's place in the data is written, from the source to the checkpoint.

An item's *key* is ``epoch << KEY_SHIFT | position``: the epoch (from 1) and the item's position in
that epoch's order, in one ``int64``. Sources give keys, stages carry them as *tags* (the key of a
datapoint's item, an ``int``, or the keys of the items it is made of, an ``int64`` array; None for
no item), ranks exchange them and the ledger turns them into a
:class:`~towerpack.dataflow.resume.position.DataPosition`. Nothing else encodes a key.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "KEY_SHIFT",
    "Tag",
    "as_keys",
    "epochs_of",
    "join",
    "join_all",
    "key_base",
    "keys_of",
    "split_keys",
]

#: Bits of a key that hold the position; the epoch is above them.
KEY_SHIFT = 40
_POSITION_MASK = (1 << KEY_SHIFT) - 1
_EMPTY = np.zeros(0, np.int64)

Tag = int | np.ndarray | None


def key_base(epoch: int) -> int:
    """The key of position 0 of ``epoch`` (a position's key is this plus the position)."""
    return int(epoch) << KEY_SHIFT


def keys_of(epoch: int, positions: np.ndarray) -> np.ndarray:
    """The keys of ``positions`` of epoch ``epoch``."""
    return np.asarray(positions, dtype=np.int64) + key_base(epoch)


def split_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(epochs, positions)`` of ``keys``."""
    return keys >> KEY_SHIFT, keys & _POSITION_MASK


def epochs_of(keys: np.ndarray) -> np.ndarray:
    """The epoch of each of ``keys``."""
    return np.asarray(keys, dtype=np.int64) >> KEY_SHIFT


def as_keys(tag: Tag) -> np.ndarray:
    """A tag as an ``int64`` array of keys (empty for None)."""
    if tag is None:
        return _EMPTY
    if type(tag) is int:  # one item's key (the common tags first: this runs for every datapoint served)
        return np.array((tag,), np.int64)
    if type(tag) is np.ndarray and tag.dtype == np.int64 and tag.ndim == 1:
        return tag
    return np.atleast_1d(np.asarray(tag, dtype=np.int64))


def join(a: Tag, b: Tag) -> Tag:
    """One tag holding the keys of both (None is no key)."""
    if a is None:
        return b
    if b is None:
        return a
    return np.concatenate([as_keys(a), as_keys(b)])


def join_all(tags: list[Any]) -> np.ndarray:
    """The keys of ``tags`` in one array."""
    try:  # ints, or arrays of one length (a batch of batches): one conversion
        return np.array(tags, dtype=np.int64).ravel()
    except (TypeError, ValueError):  # None among them, or arrays of several lengths
        return np.concatenate([as_keys(t) for t in tags]) if tags else _EMPTY
