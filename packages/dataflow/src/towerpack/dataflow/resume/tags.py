"""Tags: the epoch positions that items carry through a pipeline, and the log of those a consumer took.

In tag mode (:class:`~towerpack.dataflow.resume.tracker.PositionTracker`) every item a resumable
source yields gets a *key*, ``epoch << KEY_SHIFT | position`` (its position in that epoch's order).
A datapoint's *tag* is the key of its item (an ``int``) or the keys of the items it is made of (an
``int64`` array); stages set ``_tag`` on themselves before they yield a datapoint, and the stage
after them reads it right after taking the datapoint. Items a stage drops travel on with the next
datapoint it yields (:func:`join`), so that they count as done once that datapoint is.

:class:`TagLog` keeps the tags of the datapoints a consumer took, in order (what a job did with
them is kept by :class:`~towerpack.dataflow.resume.ledger.Ledger`); :func:`pack_keys` and
:func:`unpack_keys` put keys into the fixed-size ``int64`` rows that ranks all-gather to learn each
other's (consecutive keys as runs: a step's batch often takes consecutive positions).
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
    "runs_of",
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


def runs_of(numbers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, lengths)`` of the runs of consecutive values in sorted, distinct ``numbers``."""
    numbers = np.asarray(numbers, dtype=np.int64)
    if not len(numbers):
        return _EMPTY, _EMPTY
    breaks = np.flatnonzero(np.diff(numbers) != 1) + 1
    firsts = np.concatenate([[0], breaks])
    return numbers[firsts], np.diff(np.concatenate([firsts, [len(numbers)]]))


def pack_keys(keys: np.ndarray, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """An ``int64`` row of ``1 + capacity`` values holding what fits of ``keys``, and the keys that
    did not fit (sorted; the smallest go first).

    The row is ``[n, entries..., 0...]``: ``n`` entries, each a key (``>= 0``) that starts a run of
    consecutive keys, followed by ``-m`` when the run goes on for ``m`` more keys. A key alone takes
    one entry, a run of any length two; a row holds each distinct key once.
    """
    if capacity < 1:
        raise ValueError(f"pack_keys: capacity must be >= 1, got {capacity}")
    keys = np.unique(np.asarray(keys, dtype=np.int64))
    if len(keys) and keys[0] < 0:
        raise ValueError(f"pack_keys: keys are >= 0, got {int(keys[0])}")
    starts, lengths = runs_of(keys)
    end = np.cumsum(np.where(lengths > 1, 2, 1))
    whole = int(np.searchsorted(end, capacity, side="right"))  # the runs that fit whole
    if whole < len(starts) and (end[whole - 1] if whole else 0) < capacity:
        lengths = lengths.copy()
        lengths[whole] = 1  # one entry left: the next run's first key goes alone
        whole += 1
    starts, lengths = starts[:whole], lengths[:whole]
    runs = lengths > 1
    cost = np.where(runs, 2, 1)
    at = 1 + np.cumsum(cost) - cost
    row = np.zeros(1 + capacity, np.int64)
    row[0] = cost.sum()
    row[at] = starts
    row[at[runs] + 1] = 1 - lengths[runs]
    return row, keys[int(lengths.sum()) :]


def unpack_keys(rows: np.ndarray) -> np.ndarray:
    """The keys in ``rows`` (one row, or one per rank, as :func:`pack_keys` made them)."""
    rows = np.asarray(rows, dtype=np.int64)
    rows = rows.reshape(-1, rows.shape[-1])
    counts = rows[:, 0]
    if np.any(counts < 0) or np.any(counts >= rows.shape[1]):
        raise ValueError(f"a row of keys counts {counts.tolist()} entries in {rows.shape[1] - 1}")
    entries = rows[:, 1:][np.arange(rows.shape[1] - 1) < counts[:, None]]
    if not len(entries):
        return _EMPTY
    more = entries < 0
    firsts = np.flatnonzero(~more)
    if np.any(more & ~np.concatenate([[False], ~more[:-1]])):
        raise ValueError("a row of keys has a run length that follows no key")
    lengths = np.ones(len(firsts), np.int64)
    lengths[np.cumsum(~more)[more] - 1] -= entries[more]
    offsets = np.cumsum(lengths) - lengths
    return np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(entries[firsts] - offsets, lengths)
