"""Tags: the epoch positions that items carry through a pipeline, and the log of those a consumer took.

In tag mode (:class:`~towerpack.dataflow.position_tracker.PositionTracker`) every item a resumable
source yields gets a *key*, ``epoch << KEY_SHIFT | position`` (its position in that epoch's order).
A datapoint's *tag* is the key of its item (an ``int``) or the keys of the items it is made of (an
``int64`` array); stages set ``_tag`` on themselves before they yield a datapoint, and the stage
after them reads it right after taking the datapoint. Items a stage drops travel on with the next
datapoint it yields (:func:`join`), so that they count as done once that datapoint is.

:class:`TagLog` keeps the tags of the datapoints a consumer took, in order (what a job did with
them is kept by :class:`~towerpack.dataflow.ledger.Ledger`); :func:`pack_keys` and
:func:`unpack_keys` put keys into the float32 rows that ranks all-reduce to learn each other's.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import numpy as np

__all__ = [
    "KEY_SHIFT",
    "TagLog",
    "as_keys",
    "join",
    "join_all",
    "keys_of",
    "pack_keys",
    "split_keys",
    "unpack_keys",
]

#: Bits of a key that hold the position; the epoch is above them.
KEY_SHIFT = 40
_POSITION_MASK = (1 << KEY_SHIFT) - 1
_EMPTY = np.zeros(0, np.int64)

Tag = int | np.ndarray | None


def keys_of(epoch: int, positions: np.ndarray) -> np.ndarray:
    """The keys of ``positions`` of epoch ``epoch``."""
    return np.asarray(positions, dtype=np.int64) + (int(epoch) << KEY_SHIFT)


def as_keys(tag: Tag) -> np.ndarray:
    """A tag as an ``int64`` array of keys (empty for None)."""
    if tag is None:
        return _EMPTY
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


def split_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(epochs, positions)`` of ``keys``."""
    return keys >> KEY_SHIFT, keys & _POSITION_MASK


class TagLog:
    """The tags of the datapoints a consumer took from a pipeline, in the order it took them.

    One thread appends (the one that iterates the pipeline); another may wait in :meth:`pop` for
    the tags of datapoints not taken yet.
    """

    def __init__(self) -> None:
        self._entries: deque[Tag] = deque()
        self._cond = threading.Condition()
        self.appended = 0
        self.popped = 0

    def append(self, tag: Tag) -> None:
        with self._cond:
            self._entries.append(tag)
            self.appended += 1
            self._cond.notify_all()

    def pop(self, n: int, timeout: float | None = None) -> np.ndarray:
        """The keys of the next ``n`` datapoints' tags, waiting for them to be taken if need be.

        Raises ``TimeoutError`` when they are not there within ``timeout`` seconds.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._entries) >= n, timeout):
                raise TimeoutError(f"the tags of {n} datapoints did not come within {timeout} s")
            tags = [self._entries.popleft() for _ in range(n)]
            self.popped += n
        return join_all(tags)

    def __len__(self) -> int:
        return len(self._entries)


#: Positions and epochs travel as two float32 halves of 24 bits each: exact in an all-reduce sum.
_HALF = 24
_HALF_MASK = (1 << _HALF) - 1
_EPOCH_BITS = 16


def pack_keys(keys: np.ndarray, base_epoch: int, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """A float32 row of ``1 + 2 * capacity`` values holding up to ``capacity`` of ``keys``, and the
    keys that did not fit. ``base_epoch``: the epoch the job started at (keys of earlier ones are not
    sent: they are done)."""
    epochs, positions = split_keys(np.asarray(keys, dtype=np.int64))
    offset = epochs - int(base_epoch)
    keep = offset >= 0
    if keep.any() and (int(offset[keep].max()) >= 1 << _EPOCH_BITS or int(positions.max()) >= 1 << 32):
        raise ValueError("a tag is beyond what the position exchange carries (2^32 items, 2^16 epochs)")
    packed = (offset[keep] << 32) | positions[keep]
    sent, rest = packed[:capacity], keys[keep][capacity:]
    row = np.zeros(1 + 2 * capacity, np.float32)
    row[0] = len(sent)
    row[1 : 1 + len(sent)] = sent >> _HALF
    row[1 + capacity : 1 + capacity + len(sent)] = sent & _HALF_MASK
    return row, rest


def unpack_keys(rows: np.ndarray, base_epoch: int) -> np.ndarray:
    """The keys in ``rows`` (one per rank, as :func:`pack_keys` made them)."""
    rows = np.asarray(rows)
    capacity = (rows.shape[1] - 1) // 2
    out = []
    for row in rows:
        n = round(float(row[0]))
        hi = np.rint(row[1 : 1 + n]).astype(np.int64)
        lo = np.rint(row[1 + capacity : 1 + capacity + n]).astype(np.int64)
        packed = (hi << _HALF) | lo
        out.append(((packed >> 32) + int(base_epoch)) << KEY_SHIFT | (packed & 0xFFFFFFFF))
    return np.concatenate(out) if out else _EMPTY
