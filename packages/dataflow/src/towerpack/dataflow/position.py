"""Exact data position: which items of an epoch a job has trained on, so that a resume continues it.

A checkpoint records a :class:`DataPosition`: the dataflow's epoch and the positions of that
epoch's order already trained on. It is computed, by pure arithmetic, from one number: the
datapoints this rank consumed since
:meth:`~towerpack.dataflow.position_tracker.PositionTracker.start` (all ranks of a synchronous job
consume the same number). That works because, in tracking mode, the rank's stream is a pure
function of the epoch order (from ``(seed, epoch)``), what of the epoch is left, and the shard:

- a fresh epoch is split among ranks then workers as without tracking; what is left of a stopped
  one (its positions in epoch order) is split the same way but in whole :class:`Units`: the items
  one datapoint of a rank's pipeline takes, and of a worker's. So no worker gets a partial batch
  that its pipeline would drop, and a resume at the layout of the stop reads what an
  uninterrupted run would (when the fresh split gave whole units, as with ``n`` a multiple of
  ranks x workers x batch);
- each worker yields its part in a deterministic order (a reader's shuffle buffer is seeded per
  worker, so it can be replayed on positions);
- the runner merges its workers strictly round-robin (worker 0, 1, .., k-1, 0, ...; a worker that
  has finished its part of the epoch is skipped).

So the number of ranks, workers per rank and batch sizes may change between the stop and the
resume: the next run splits what is left of the epoch its own way. The chief computes every
rank's consumption from its own pipeline: all ranks must run the same one (workers, batch sizes).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .sharding import Remainder, Shard, _split, dataflow_tree

__all__ = [
    "DataPosition",
    "PositionUnsupportedError",
    "Units",
    "leftover_runs",
    "unit_runs",
]

Ranges = tuple[tuple[int, int], ...]


class PositionUnsupportedError(ValueError):
    """A dataflow cannot track its exact position; the message names the stage and why."""


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """``ranges`` sorted, with empty ones dropped and overlapping or touching ones merged."""
    out: list[list[int]] = []
    for start, stop in sorted((int(a), int(b)) for a, b in ranges if b > a):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], stop)
        else:
            out.append([start, stop])
    return tuple((a, b) for a, b in out)


def _complement(ranges: Ranges, size: int) -> list[tuple[int, int]]:
    free, pos = [], 0
    for start, stop in ranges:
        if start > pos:
            free.append((pos, start))
        pos = stop
    if pos < size:
        free.append((pos, size))
    return free


@dataclass(frozen=True)
class DataPosition:
    """Where the data of a job stands: epoch ``epoch`` (from 1) of a dataset of ``size`` items, of
    which the positions in ``consumed`` (sorted, disjoint ``(start, stop)`` ranges of the epoch's
    order) were trained on. ``DataPosition(1, n)`` is the start of training."""

    epoch: int
    size: int
    consumed: Ranges = field(default=())

    def __post_init__(self) -> None:
        if not isinstance(self.epoch, int) or self.epoch < 1:
            raise ValueError(f"DataPosition: epoch must be an int >= 1, got {self.epoch!r}")
        if not isinstance(self.size, int) or self.size < 0:
            raise ValueError(f"DataPosition: size must be an int >= 0, got {self.size!r}")
        ranges = tuple((int(a), int(b)) for a, b in self.consumed)
        if merge_ranges(ranges) != ranges:
            raise ValueError(
                "DataPosition: consumed must be sorted, disjoint, non-empty (start, stop) ranges, "
                f"got {ranges}"
            )
        if ranges and (ranges[0][0] < 0 or ranges[-1][1] > self.size):
            raise ValueError(
                f"DataPosition: consumed ranges {ranges[0]}..{ranges[-1]} lie outside [0, {self.size})"
            )
        object.__setattr__(self, "consumed", ranges)

    @classmethod
    def of(cls, epoch: int, size: int, positions: Iterable[tuple[int, int]]) -> DataPosition:
        """The position with ``positions`` (any ranges) consumed; a complete epoch is the next one's start."""
        ranges = merge_ranges(positions)
        if size and ranges == ((0, size),):
            return cls(epoch + 1, size)
        return cls(epoch, size, ranges)

    @property
    def count(self) -> int:
        """Items of the epoch consumed."""
        return sum(b - a for a, b in self.consumed)

    def left(self) -> list[tuple[int, int]]:
        """The positions of the epoch not consumed yet, as ranges in epoch order."""
        return _complement(self.consumed, self.size)

    def check_size(self, size: int, what: str = "the dataset") -> None:
        """Raise ValueError when this position is of a dataset of another size than ``size``."""
        if self.size != size:
            raise ValueError(
                f"the data position is of a dataset of {self.size} items, but {what} has {size} items"
            )

    def to_dict(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "size": self.size, "consumed": [list(r) for r in self.consumed]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DataPosition:
        if not isinstance(data, dict) or set(data) != {"epoch", "size", "consumed"}:
            got = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise ValueError(f"DataPosition: expected the keys ['consumed', 'epoch', 'size'], got {got}")
        consumed = data["consumed"]
        if not isinstance(consumed, list) or not all(
            isinstance(r, (list, tuple)) and len(r) == 2 and all(type(v) is int for v in r) for r in consumed
        ):
            raise ValueError(
                f"DataPosition: 'consumed' must be a list of [start, stop] int pairs, got {consumed!r}"
            )
        return cls(data["epoch"], data["size"], tuple((a, b) for a, b in consumed))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> DataPosition:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"DataPosition: not JSON: {e}") from None
        return cls.from_dict(data)


@dataclass(frozen=True)
class Units:
    """Items one datapoint takes: ``rank`` of a rank's pipeline (the product of all its batch sizes),
    ``worker`` of a worker's (the batch sizes inside the runner); ``rank`` is a multiple of ``worker``."""

    rank: int = 1
    worker: int = 1

    def __post_init__(self) -> None:
        if self.worker < 1 or self.rank % self.worker:
            raise ValueError(f"Units: rank ({self.rank}) must be a multiple of worker ({self.worker}) >= 1")


def unit_runs(n: int, shard: Shard, remainder: Remainder, units: Units = Units()) -> list[range]:
    """The positions (of ``0..n-1``) ``shard`` reads, split as :meth:`Shard.runs` splits them but
    in whole units: ranks get whole ``units.rank`` chunks, their workers whole ``units.worker`` ones.

    What cannot be shared out evenly follows ``remainder``: ``DROP`` skips the last items (fewer than
    ``world_size * units.rank``), ``PAD`` re-uses the first ones, ``UNEVEN`` gives the extra chunks
    (and a last partial one) to the first ranks. With units of 1 this is ``shard.runs(n, remainder)``.
    """
    if n == 0:
        return []
    big, small = units.rank, units.worker
    chunks = -(-n // big)
    if remainder is Remainder.DROP:
        per_rank = n // big // shard.world_size
        start, length = shard.rank * per_rank * big, per_rank * big
    elif remainder is Remainder.PAD:
        per_rank = -(-chunks // shard.world_size)
        start, length = shard.rank * per_rank * big, per_rank * big
    else:
        first, count = _split(0, chunks, shard.world_size, shard.rank)
        start, length = first * big, max(0, min(count * big, n - first * big))
    first, count = _split(0, -(-length // small), shard.num_workers, shard.worker)
    start, length = start + first * small, max(0, min(count * small, length - first * small))
    runs, pos, end = [], start, start + length
    while pos < end:  # padding wraps around, more than once when n is small
        at = pos % n
        take = min(end - pos, n - at)
        runs.append(range(at, at + take))
        pos += take
    return runs


def leftover_runs(
    size: int, consumed: Ranges, shard: Shard | None, remainder: Remainder, units: Units = Units()
) -> list[range]:
    """The positions of the epoch order that ``shard`` reads when ``consumed`` is already done.

    What is left, in epoch order, is split by :func:`unit_runs` (padding re-uses the first
    left-over positions); with nothing consumed this is ``shard.runs(size, remainder)``.
    ``shard=None`` (a source that does not shard itself) reads all that is left.
    """
    free = _complement(consumed, size)
    if shard is None:
        return [range(a, b) for a, b in free]
    if not consumed:
        return shard.runs(size, remainder)
    starts = [0]
    for a, b in free:
        starts.append(starts[-1] + b - a)
    out: list[range] = []
    for piece in unit_runs(starts[-1], shard, remainder, units):
        pos = piece.start
        while pos < piece.stop:  # map left-over indices to order positions, one free range at a time
            j = bisect.bisect_right(starts, pos) - 1
            a, b = free[j]
            start = a + pos - starts[j]
            take = min(b - start, piece.stop - pos)
            if out and out[-1].stop == start:
                out[-1] = range(out[-1].start, start + take)
            else:
                out.append(range(start, start + take))
            pos += take
    return out


@dataclass(frozen=True)
class _Batch:
    size: int
    remainder: bool

    def up(self, n: int) -> int:
        return n // self.size + int(self.remainder and n % self.size > 0)


def _up(n: int, batches: Sequence[_Batch]) -> int:
    """Datapoints out of ``batches`` (innermost first) from ``n`` datapoints in."""
    for b in batches:
        n = b.up(n)
    return n


@dataclass(frozen=True)
class Tracking:
    """What a runner in tracking mode knows of its workers' pipelines: the batches in them, to check
    that every pass yields the datapoints its items make (no stage dropped or added any)."""

    inner: tuple[_Batch, ...]

    def check_pass(self, ds: Any, produced: int) -> None:
        """Raise when a worker's pass over ``ds`` yielded another number of datapoints than planned."""
        source = next(d for d in dataflow_tree(ds) if isinstance(d, PositionSource))
        expected = _up(source._items_read, self.inner)
        if produced != expected:
            raise PositionUnsupportedError(
                f"exact data position: a worker's pass read {source._items_read} items of "
                f"{type(source).__name__} but its pipeline yielded {produced} datapoints instead of "
                f"{expected}: a stage drops or adds datapoints (a MapData whose function returns None?)"
            )


class PositionSource:
    """Mixin of the sources whose epochs a :class:`PositionTracker` can continue mid-way.

    The source (a :class:`~towerpack.dataflow.sharding.SelfSharding` dataflow with an ``_epoch``
    counter) reads ``_epoch_runs(n, _consumed(epoch))`` of each epoch's order; a source that yields
    its runs in another order than theirs implements ``_emitted_positions(epoch, shard, runs, count)``.
    """

    _resume: DataPosition | None = None
    #: Set in tracking mode: the units the epochs are split in (see :func:`unit_runs`).
    _units: Units | None = None
    #: Items read in the current (last) pass, for :meth:`Tracking.check_pass`.
    _items_read = 0

    def _start_at(self, position: DataPosition, units: Units) -> None:
        self._resume = position
        self._units = units
        self._epoch = position.epoch - 1

    def _first_epoch(self) -> int:
        """The epoch counter before the first iteration: that iteration continues the position."""
        return self._resume.epoch - 1 if self._resume is not None else 0

    def _consumed(self, epoch: int) -> Ranges:
        """What the start position says is consumed of ``epoch`` (nothing for later epochs)."""
        r = self._resume
        return r.consumed if r is not None and r.epoch == epoch else ()

    def _epoch_runs(self, size: int, consumed: Ranges) -> list[range]:
        """The positions of the epoch order this process reads, in reading order."""
        shard = self.shard() if self.shards_itself else None  # type: ignore[attr-defined]
        units = self._units or Units()
        return leftover_runs(size, consumed, shard, self.remainder, units)  # type: ignore[attr-defined]


def round_robin_counts(lengths: Sequence[int], count: int) -> list[int]:
    """How many datapoints each worker gave after ``count`` of a strict round-robin merge.

    Workers take turns in index order; one whose part (``lengths[i]``) is exhausted is skipped.
    """
    total = sum(lengths)
    if not 0 <= count <= total:
        raise ValueError(f"round robin: count {count} is outside [0, {total}]")
    lo, hi = 0, max(lengths, default=0)
    while lo < hi:  # the most complete rounds whose datapoints fit in count
        mid = (lo + hi + 1) // 2
        if sum(min(n, mid) for n in lengths) <= count:
            lo = mid
        else:
            hi = mid - 1
    counts = [min(n, lo) for n in lengths]
    extra = count - sum(counts)
    for i, n in enumerate(lengths):
        if extra and n > lo:
            counts[i] += 1
            extra -= 1
    return counts


def _down(count: int, n: int, batches: Sequence[_Batch]) -> int:
    """Datapoints in (of ``n``) that make the first ``count`` out of ``batches`` (innermost first).

    A partial batch that is dropped does not count: its items were not trained on, so a resume
    mid-epoch reads them (at the epoch's end :meth:`PositionTracker.position` moves on anyway).
    """
    levels = [n]
    for b in batches:
        levels.append(b.up(levels[-1]))
    for i in range(len(batches) - 1, -1, -1):
        count = min(count * batches[i].size, levels[i])
    return min(count, n)
