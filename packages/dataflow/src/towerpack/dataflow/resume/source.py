"""PositionSource: the side of exact resume a source implements (readers, indexed datasets).

A source continues a :class:`~towerpack.dataflow.resume.position.DataPosition`: it reads only what
the position leaves of each epoch, split among ranks and workers by
:mod:`towerpack.dataflow.resume.split`, and in tag mode gives every item its key
(:mod:`towerpack.dataflow.resume.keys`), which is how a rank knows what it trained on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from ..pipeline.sharding import Remainder, Shard
from .keys import join, key_base, keys_of
from .position import DataPosition
from .protocol import SourceStart, Step, StepKind
from .ranges import Ranges
from .split import Units, dropped_positions, fixed_runs, leftover_runs

__all__ = ["PositionSource"]


class PositionSource:
    """Mixin of the sources whose epochs a :class:`PositionTracker` can continue mid-way.

    The source (a :class:`~towerpack.dataflow.pipeline.sharding.SelfSharding` dataflow with an ``_epoch``
    counter) reads ``_epoch_runs(n, _consumed(epoch))`` of each epoch's order. Replaying, a source
    that yields its runs in another order than theirs overrides :meth:`emitted_positions`; in tag
    mode it yields its items through :meth:`_tag_pairs`, which gives each one its key
    (``IndexedDataset`` writes that loop out).
    """

    _resume: DataPosition | None = None
    #: Set in tracking mode: the units the epochs are split in (see :func:`unit_runs`).
    _units: Units | None = None
    #: Tag mode: items carry their keys (see :mod:`towerpack.dataflow.resume.keys`).
    _tagging = False
    #: Tag mode for data servers: a rank keeps its part of every whole epoch (see :func:`fixed_runs`).
    _fixed = False
    #: The keys of items passed over, which go with the next one yielded.
    _skipped: Any = None
    #: Items read in the current (last) pass, for :meth:`Tracking.check_pass`.
    items_read = 0

    def resume_step(self) -> Step:
        return Step(StepKind.SOURCE)

    def start_at(self, start: SourceStart) -> None:
        """Make the next iteration continue ``start.position`` (before ``reset_state``)."""
        self._resume = start.position
        self._units = start.units
        self._tagging = start.tags
        self._fixed = start.fixed_ranks
        self._epoch = start.position.epoch - 1

    def epoch_size(self) -> int:
        """Items in an epoch, all processes together."""
        return self._count()  # type: ignore[attr-defined]

    def emitted_positions(self, epoch: int, shard: Shard, runs: list[range], count: int) -> list[int] | None:
        """Replaying: the order positions of the first ``count`` items this source yields reading
        ``runs`` of ``epoch``, when it yields them in another order than the runs' (None: in theirs)."""
        return None

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
        """The items of ``(position, item)`` pairs of ``epoch``'s order, each with its key as
        ``position_tag``."""
        base = key_base(epoch)
        pending = self._take_pending(epoch)
        pairs = iter(pairs)
        if pending is not None:
            for pos, item in pairs:  # the first item takes the keys passed over
                self.position_tag, pending = join(pending, base + pos), None
                yield item
                break
        for pos, item in pairs:  # the hot loop: one key per item
            self.position_tag = base + pos
            yield item
        self._skipped = join(self._skipped, pending)  # an empty pass: the next item takes them
