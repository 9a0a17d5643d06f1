"""Exact data position: what a checkpoint records of the data, and the sources that continue it.

A :class:`DataPosition` names the oldest epoch not finished, the positions of its order trained on,
and those of later epochs already begun. A :class:`PositionSource` (the dataset readers) reads only
what a position leaves of each epoch, split among ranks and workers by
:mod:`towerpack.dataflow.resume.split`; in tag mode it gives every item its key
(:mod:`towerpack.dataflow.resume.tags`), which is how a rank knows what it trained on.

Replaying (for ranks that cannot share what they trained on, see
:mod:`towerpack.dataflow.resume.tracker`), one rank computes every rank's items from a count of
datapoints: every worker yields its part in a deterministic order (a reader's shuffle buffer is
seeded per worker, so it can be replayed on positions), the runner merges its workers strictly
round-robin (:func:`round_robin_counts`), and batches turn counts of items into counts of
datapoints (:func:`_up`, :func:`_down`); :class:`Tracking` checks in the workers that no stage drops
or adds datapoints.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..pipeline.sharding import Remainder, dataflow_tree
from .split import Units, _complement, dropped_positions, fixed_runs, leftover_runs
from .tags import KEY_SHIFT, join, keys_of

__all__ = ["DataPosition", "PositionSource", "PositionUnsupportedError", "merge_ranges", "round_robin_counts"]

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


def _check_ranges(ranges: Ranges, size: int, what: str) -> Ranges:
    ranges = tuple((int(a), int(b)) for a, b in ranges)
    if merge_ranges(ranges) != ranges:
        raise ValueError(
            f"DataPosition: {what} must be sorted, disjoint, non-empty (start, stop) ranges, got {ranges}"
        )
    if ranges and (ranges[0][0] < 0 or ranges[-1][1] > size):
        raise ValueError(f"DataPosition: {what} ranges {ranges[0]}..{ranges[-1]} lie outside [0, {size})")
    return ranges


def _ranges_of(value: Any, what: str) -> Ranges:
    if not isinstance(value, list) or not all(
        isinstance(r, (list, tuple)) and len(r) == 2 and all(type(v) is int for v in r) for r in value
    ):
        raise ValueError(f"DataPosition: {what!r} must be a list of [start, stop] int pairs, got {value!r}")
    return tuple((a, b) for a, b in value)


@dataclass(frozen=True)
class DataPosition:
    """Where the data of a job stands: epoch ``epoch`` (from 1) of a dataset of ``size`` items, of
    which the positions in ``consumed`` (sorted, disjoint ``(start, stop)`` ranges of the epoch's
    order) were trained on. ``DataPosition(1, n)`` is the start of training.

    ``later`` holds ``(epoch, ranges)`` of later epochs already begun, for pipelines that mix epochs
    (an item of the next epoch trained on before the last ones of this one): a resume reads what is
    left of ``epoch``, then what is left of each later one."""

    epoch: int
    size: int
    consumed: Ranges = field(default=())
    later: tuple[tuple[int, Ranges], ...] = field(default=())

    def __post_init__(self) -> None:
        if not isinstance(self.epoch, int) or self.epoch < 1:
            raise ValueError(f"DataPosition: epoch must be an int >= 1, got {self.epoch!r}")
        if not isinstance(self.size, int) or self.size < 0:
            raise ValueError(f"DataPosition: size must be an int >= 0, got {self.size!r}")
        object.__setattr__(self, "consumed", _check_ranges(self.consumed, self.size, "consumed"))
        later, last = [], self.epoch
        for epoch, ranges in self.later:
            if not isinstance(epoch, int) or epoch <= last:
                raise ValueError(
                    f"DataPosition: later epochs must be increasing ints after {self.epoch}, got {epoch!r}"
                )
            ranges = _check_ranges(ranges, self.size, f"epoch {epoch}'s")
            if not ranges:
                raise ValueError(f"DataPosition: later epoch {epoch} has no consumed ranges")
            later.append((epoch, ranges))
            last = epoch
        object.__setattr__(self, "later", tuple(later))

    @classmethod
    def of(cls, epoch: int, size: int, positions: Iterable[tuple[int, int]]) -> DataPosition:
        """The position with ``positions`` (any ranges) consumed; a complete epoch is the next one's start."""
        return cls.of_epochs(size, {epoch: merge_ranges(positions)}, epoch)

    @classmethod
    def of_epochs(cls, size: int, epochs: dict[int, Ranges], first: int) -> DataPosition:
        """The position with ``epochs[e]`` consumed of each epoch ``e >= first`` (earlier ones done):
        it starts at the first epoch not complete."""
        full = ((0, size),) if size else ()
        epoch = first
        while size and merge_ranges(epochs.get(epoch, ())) == full:
            epoch += 1
        later = tuple(
            (e, merge_ranges(r)) for e, r in sorted(epochs.items()) if e > epoch and merge_ranges(r)
        )
        return cls(epoch, size, merge_ranges(epochs.get(epoch, ())), later)

    @property
    def count(self) -> int:
        """Items of the epoch consumed."""
        return sum(b - a for a, b in self.consumed)

    def consumed_in(self, epoch: int) -> Ranges:
        """The ranges consumed of ``epoch``: all of it before ``self.epoch``, nothing after the last begun."""
        if epoch < self.epoch:
            return ((0, self.size),) if self.size else ()
        if epoch == self.epoch:
            return self.consumed
        return dict(self.later).get(epoch, ())

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
        out: dict[str, Any] = {
            "epoch": self.epoch,
            "size": self.size,
            "consumed": [list(r) for r in self.consumed],
        }
        if self.later:
            out["later"] = [[e, [list(r) for r in ranges]] for e, ranges in self.later]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DataPosition:
        keys = {"epoch", "size", "consumed"}
        if not isinstance(data, dict) or not keys <= set(data) <= keys | {"later"}:
            got = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise ValueError(
                f"DataPosition: expected the keys ['consumed', 'epoch', 'size'] (and 'later'), got {got}"
            )
        later = data.get("later", [])
        if not isinstance(later, list) or not all(
            isinstance(x, list) and len(x) == 2 and type(x[0]) is int for x in later
        ):
            raise ValueError(f"DataPosition: 'later' must be a list of [epoch, ranges] pairs, got {later!r}")
        return cls(
            data["epoch"],
            data["size"],
            _ranges_of(data["consumed"], "consumed"),
            tuple((e, _ranges_of(r, f"later epoch {e}")) for e, r in later),
        )

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

    The source (a :class:`~towerpack.dataflow.pipeline.sharding.SelfSharding` dataflow with an ``_epoch``
    counter) reads ``_epoch_runs(n, _consumed(epoch))`` of each epoch's order. Replaying, a source
    that yields its runs in another order than theirs implements
    ``_emitted_positions(epoch, shard, runs, count)``; in tag mode it yields its items through
    :meth:`_tag_pairs`, which gives each one its key (``IndexedDataset`` writes that loop out).
    """

    _resume: DataPosition | None = None
    #: Set in tracking mode: the units the epochs are split in (see :func:`unit_runs`).
    _units: Units | None = None
    #: Items read in the current (last) pass, for :meth:`Tracking.check_pass`.
    _items_read = 0
    #: Tag mode: items carry their keys (see :mod:`towerpack.dataflow.resume.tags`).
    _tagging = False
    #: Tag mode for data servers: a rank keeps its part of every whole epoch (see :func:`fixed_runs`).
    _fixed = False
    #: The tag of the item yielded last, and the keys of items passed over that go with the next one.
    _tag: Any = None
    _skipped: Any = None

    def _start_at(
        self, position: DataPosition, units: Units, tagging: bool = False, fixed: bool = False
    ) -> None:
        self._resume = position
        self._units = units
        self._tagging = tagging
        self._fixed = fixed
        self._epoch = position.epoch - 1

    def _first_epoch(self) -> int:
        """The epoch counter before the first iteration: that iteration continues the position."""
        return self._resume.epoch - 1 if self._resume is not None else 0

    def _consumed(self, epoch: int) -> Ranges:
        """What the start position says is consumed of ``epoch``."""
        r = self._resume
        return r.consumed_in(epoch) if r is not None and epoch >= r.epoch else ()

    def _epoch_runs(self, size: int, consumed: Ranges) -> list[range]:
        """The positions of the epoch order this process reads, in reading order."""
        shard = self.shard() if self.shards_itself else None  # type: ignore[attr-defined]
        units = self._units or Units()
        if self._fixed and shard is not None:
            return fixed_runs(size, consumed, shard, self.remainder, units)  # type: ignore[attr-defined]
        return leftover_runs(size, consumed, shard, self.remainder, units)  # type: ignore[attr-defined]

    def _dropped_keys(self, epoch: int, size: int) -> np.ndarray | None:
        """Tag mode: the keys of the positions of ``epoch`` that no rank reads (``remainder="drop"``)."""
        if not self.shards_itself or self.remainder is not Remainder.DROP:  # type: ignore[attr-defined]
            return None
        shard = self.shard()  # type: ignore[attr-defined]
        consumed = () if self._fixed else self._consumed(epoch)
        positions = dropped_positions(size, consumed, shard.world_size, (self._units or Units()).rank)
        return keys_of(epoch, positions) if len(positions) else None

    def _take_pending(self, epoch: int) -> Any:
        """Tag mode, at the start of a pass over ``epoch``: the keys that go with its first item (those
        passed over before, and those of the epoch no rank reads); the caller puts them back in
        ``_skipped`` if the pass yields nothing."""
        pending = join(self._skipped, self._dropped_keys(epoch, self._count()))  # type: ignore[attr-defined]
        self._skipped = None
        return pending

    def _tag_pairs(self, epoch: int, pairs: Iterable[tuple[int, Any]]) -> Iterator[Any]:
        """The items of ``(position, item)`` pairs of ``epoch``'s order, each with its key as ``_tag``."""
        base = epoch << KEY_SHIFT
        pending = self._take_pending(epoch)
        pairs = iter(pairs)
        if pending is not None:
            for pos, item in pairs:  # the first item takes the keys passed over
                self._tag, pending = join(pending, base + pos), None
                yield item
                break
        for pos, item in pairs:  # the hot loop: one key per item
            self._tag = base + pos
            yield item
        self._skipped = join(self._skipped, pending)  # an empty pass: the next item takes them


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
