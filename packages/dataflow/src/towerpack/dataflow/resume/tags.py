"""Tags of the datapoints a consumer took, and the rows in which ranks exchange their keys.

In tag mode (:class:`~towerpack.dataflow.resume.tracker.PositionTracker`) every datapoint carries
its tag (the keys of its items, :mod:`towerpack.dataflow.resume.keys`) as the ``position_tag`` of
the stage that yielded it (:mod:`towerpack.dataflow.resume.protocol`). :class:`TagLog` keeps the
tags of the datapoints a consumer took, in order (what a job did with them is kept by
:class:`~towerpack.dataflow.resume.ledger.Ledger`); :func:`pack_keys` and :func:`unpack_keys` put
keys into the fixed-size ``int64`` rows that ranks all-gather to learn each other's (consecutive
keys as runs: a step's batch often takes consecutive positions).
"""

from __future__ import annotations

import threading
from collections import deque

import numpy as np

from .keys import Tag, join_all
from .ranges import expand, runs_of

__all__ = ["TagLog", "pack_keys", "unpack_keys"]

_EMPTY = np.zeros(0, np.int64)


class TagLog:
    """The tags of the datapoints a consumer took from a pipeline, in the order it took them.

    One thread appends (the one that iterates the pipeline); another may wait in :meth:`pop` for
    the tags of datapoints not taken yet. An append is a deque append (thread-safe by itself) and
    takes the lock only to wake a waiting :meth:`pop`: it runs once per datapoint.
    """

    def __init__(self) -> None:
        self._entries: deque[Tag] = deque()
        self._cond = threading.Condition()
        self._waiters = 0
        self.appended = 0
        self.popped = 0

    def append(self, tag: Tag) -> None:
        self._entries.append(tag)
        self.appended += 1
        # A pop that counts itself as waiting after this check looks at the entries after this append.
        if self._waiters:
            with self._cond:
                self._cond.notify_all()

    def pop(self, n: int, timeout: float | None = None) -> np.ndarray:
        """The keys of the next ``n`` datapoints' tags, waiting for them to be taken if need be.

        Raises ``TimeoutError`` when they are not there within ``timeout`` seconds.
        """
        entries = self._entries
        if len(entries) < n:
            with self._cond:
                self._waiters += 1
                try:
                    if not self._cond.wait_for(lambda: len(entries) >= n, timeout):
                        raise TimeoutError(f"the tags of {n} datapoints did not come within {timeout} s")
                finally:
                    self._waiters -= 1
        tags = [entries.popleft() for _ in range(n)]
        self.popped += n
        return join_all(tags)

    def __len__(self) -> int:
        return len(self._entries)


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
    return expand(entries[firsts], lengths)
