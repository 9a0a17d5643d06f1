"""PositionTracker: the exact data position of one rank's pipeline, from what it trained on.

:func:`~towerpack.dataflow.resume.plan.analyze` walks the pipeline down to its source (anything
that cannot be tracked is refused by name); the tracker starts the source's copies at a
:class:`~towerpack.dataflow.resume.position.DataPosition` and turns what the rank trained on into the
position a checkpoint records, in one of two modes (:class:`PositionMode`):

- ``TAGS``: every item carries its key (epoch and position, :mod:`towerpack.dataflow.resume.tags`)
  through the stages; :meth:`PositionTracker.iterate` logs the tags of the datapoints the consumer
  takes, and the first ``count`` of them are what it trained on. A rank knows its own items; the
  job's position is the union over the ranks (:class:`~towerpack.dataflow.resume.ledger.Ledger`).
- ``REPLAY``: every rank's stream is made a function of the position (runners merge strictly round
  robin), so that one rank computes from a count of datapoints which items every rank consumed (the
  arithmetic of :mod:`towerpack.dataflow.resume.position`). For jobs whose ranks cannot share their tags.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..pipeline.sharding import Shard
from ..pipeline.stream import repeat_forever
from .ledger import Ledger
from .plan import Plan, analyze
from .position import DataPosition, PositionUnsupportedError
from .protocol import SourceStart, TrackMode
from .ranges import Ranges, ranges_of
from .replay import Tracking, batches_down, batches_up, round_robin_counts
from .split import Units, leftover_runs
from .tags import TagLog

__all__ = ["PositionMode", "PositionTracker"]


class PositionMode(enum.Enum):
    """How a :class:`PositionTracker` knows what was trained on (see the module docstring)."""

    TAGS = "tags"
    REPLAY = "replay"


class PositionTracker:
    """Tracks the exact data position of one rank's dataflow; see the module docstring.

    Make it with :meth:`of` before ``reset_state``, call :meth:`start`, then ``reset_state`` and
    iterate (in tag mode through :meth:`iterate`); :meth:`position` turns the count of datapoints
    trained on into a :class:`DataPosition` for the checkpoint.
    """

    def __init__(self, plan: Plan, rank: int, world_size: int, df: Any = None) -> None:
        self._plan = plan
        self._df = df
        self.rank = rank
        self.world_size = world_size
        self.mode: PositionMode | None = None
        self._start: DataPosition | None = None
        self._trained_before = 0  # datapoints the consumer trained on before start() (see start)
        self._fresh: int | None = None
        self._log = TagLog()
        self._ledger: Ledger | None = None
        self._empty_passes = 0
        inner = int(np.prod([b.size for b in plan.inner]))
        self.units = Units(inner * int(np.prod([b.size for b in plan.outer])), inner)

    @classmethod
    def of(cls, df: Any) -> PositionTracker:
        """The tracker of ``df``, the rank's top dataflow (what the trainer iterates).

        Raises :class:`PositionUnsupportedError` naming the first stage that cannot be tracked (see
        docs: "Exact resume").
        """
        plan = analyze(df)
        source = plan.source
        if source is not None and source.shards_itself:
            shard = source.shard()
        else:
            shard = Shard.current() if plan.remote is not None else Shard()
        return cls(plan, shard.rank, shard.world_size, df)

    @property
    def size(self) -> int | None:
        """Items in the dataset (all ranks together); from servers, None until one has said."""
        if self._plan.remote is not None:
            return self._plan.remote.dataset_size
        return int(self._plan.source.epoch_size())

    @property
    def counted(self) -> bool:
        """Whether :meth:`datapoints_per_epoch` and :meth:`remaining` can tell (no stage mixes epochs)."""
        return self._plan.uncounted is None

    @property
    def from_servers(self) -> bool:
        """Whether the data comes from `dataflow serve` servers (through ``RemoteDataZMQ``)."""
        return self._plan.remote is not None

    def set_session(self, key: tuple[int, int]) -> None:
        """Tag mode: the key of this start of the job, by which data servers tell jobs apart (all its
        ranks must give the same one)."""
        if self._plan.remote is not None:
            self._plan.remote.set_session_key(key)

    @property
    def log(self) -> TagLog:
        """Tag mode: the tags of the datapoints taken through :meth:`iterate`, in order."""
        return self._log

    def start(
        self,
        position: DataPosition | None = None,
        mode: PositionMode = PositionMode.REPLAY,
        *,
        fixed_ranks: bool = False,
        trained_before: int = 0,
    ) -> None:
        """Make the first epoch iterated continue ``position`` (None: epoch 1 from its start).

        Call before ``reset_state`` of the dataflow: the sources, stages and runners in it are
        switched to tracking mode, which reaches forked and spawned workers with the dataflow itself.
        ``fixed_ranks`` (tag mode, data servers): each rank keeps its part of every whole epoch, less
        what ``position`` holds (:func:`~towerpack.dataflow.resume.split.fixed_runs`).
        ``trained_before``: datapoints the consumer trained on before this start (a tracker made anew
        for an input restarted in place); the counts given to :meth:`position`, :meth:`trained_keys`
        and :meth:`settle` go on from there.
        """
        if int(trained_before) < 0:
            raise ValueError(f"start(): trained_before must be >= 0, got {trained_before}")
        plan = self._plan
        if position is not None and not isinstance(position, DataPosition):
            raise TypeError(f"start(): expected a DataPosition or None, got {type(position).__name__}")
        mode = PositionMode(mode)
        if mode is PositionMode.REPLAY and plan.unordered is not None:
            raise PositionUnsupportedError(
                f"exact data position: {plan.unordered} cannot be replayed; it needs tag mode, which needs "
                "one rank or ranks that all-reduce (the Horovod or collective trainers)"
            )
        for runner in plan.runners:
            if runner.started:
                raise RuntimeError(
                    f"PositionTracker.start() must come before {type(runner).__name__}.reset_state()"
                )
        tagging = mode is PositionMode.TAGS
        if plan.remote is not None:
            plan.remote.start_session(position)
        else:
            position = DataPosition(1, self.size) if position is None else position
            position.check_size(self.size, f"the dataset {type(plan.source).__name__}")
            start = SourceStart(position, self.units, tagging, fixed_ranks)
            for source in plan.sources:
                source.start_at(start)
        if tagging:
            begun = position is not None and (position.consumed or position.later)
            self._empty_passes = 1 + len(position.later) if begun else 0
            track = TrackMode(tags=True, empty_passes=self._empty_passes)
            self._ledger = Ledger(position, self.size)
        else:
            track = TrackMode(replay=Tracking(tuple(plan.inner)))
        for stage in plan.stages:
            stage.track(track)
        self.mode = mode
        self._start = position
        self._trained_before = int(trained_before)

    def iterate(self) -> Iterator[Any]:
        """Tag mode: the dataflow's datapoints, epoch after epoch, each one's tag logged as it is taken."""
        if self.mode is not PositionMode.TAGS:
            raise RuntimeError(
                "PositionTracker.iterate() is for tag mode: call start(..., PositionMode.TAGS)"
            )
        df, append = self._df, self._log.append
        for dp in repeat_forever(df, allow_empty=self._empty_passes):
            append(df.position_tag)
            yield dp

    def pairs(self) -> Iterator[tuple[Any, Any]]:
        """Tag mode: ``(tag, datapoint)`` of the dataflow, epoch after epoch (nothing logged)."""
        if self.mode is not PositionMode.TAGS:
            raise RuntimeError("PositionTracker.pairs() is for tag mode: call start(..., PositionMode.TAGS)")
        df = self._df
        for dp in repeat_forever(df, allow_empty=self._empty_passes):
            yield df.position_tag, dp

    def trained_keys(self, count: int) -> np.ndarray:
        """Tag mode: the keys of the datapoints taken (through :meth:`iterate`) up to the ``count``-th,
        from after those an earlier call returned."""
        log, before = self._log, self._trained_before
        if not log.popped <= count - before <= log.appended:
            raise ValueError(
                f"{count} datapoints trained on, but {before + log.appended} were taken "
                f"and {before + log.popped} counted already"
            )
        return log.pop(count - before - log.popped)

    def settle(self, count: int) -> None:
        """Tag mode: count the first ``count`` datapoints taken as trained on now (:meth:`position` does
        it too), so that the log does not keep them. Replaying there is nothing to settle (the count
        alone is the position), also for a tracker made anew in replay mode for a restart in place."""
        if self.mode is not PositionMode.TAGS:
            return
        ledger = self._ledger_with_size()
        ledger.add(self.trained_keys(count))
        self.note_done(ledger.first)

    def note_done(self, epoch: int) -> None:
        """Tag mode: the job has trained on every item of the epochs before ``epoch`` (servers need not
        be told again what was received of them)."""
        if self._plan.remote is not None:
            self._plan.remote.note_done(epoch)

    def _ledger_with_size(self) -> Ledger:
        ledger = self._ledger
        if ledger.size is None and self.size is not None:
            ledger.set_size(self.size)
        return ledger

    def datapoints_per_epoch(self) -> int | None:
        """This rank's datapoints (of ``df``) in a whole epoch; None when a stage mixes epochs."""
        return self._length(1, ()) if self.counted else None

    def remaining(self, position: DataPosition) -> int | None:
        """This rank's datapoints (of ``df``) still to read in the epoch that continues ``position``;
        None when a stage mixes epochs."""
        if not self.counted:
            return None
        position.check_size(self.size)
        return self._length(position.epoch, position.consumed)

    def position(self, datapoints_consumed: int) -> DataPosition:
        """The position after this rank consumed ``datapoints_consumed`` datapoints of ``df`` (since
        :meth:`start`, counted from its ``trained_before``; across epoch boundaries). Replaying: the
        job's (every rank's items, pure arithmetic); tag mode: with this rank's items (a
        :class:`Ledger` adds up the ranks')."""
        if self._start is None and self.mode is None:
            raise RuntimeError("PositionTracker.position(): call start() first")
        count = int(datapoints_consumed) - self._trained_before
        if count < 0:
            raise ValueError(
                f"datapoints_consumed must be >= {self._trained_before} (the count at start()), "
                f"got {datapoints_consumed}"
            )
        if self.mode is PositionMode.TAGS:
            self.settle(int(datapoints_consumed))
            return self._ledger.position()
        epoch, consumed = self._start.epoch, self._start.consumed
        left = self._length(epoch, consumed)
        if count < left or count == 0:
            return self._advance(epoch, consumed, count)
        count -= left
        if count == 0:  # exactly the rest of the epoch: the next one starts
            return self._advance(epoch + 1, (), 0)
        per_epoch = self._length(1, ())
        if per_epoch == 0:
            raise ValueError(f"rank {self.rank} reads no datapoint per epoch: its position cannot advance")
        epochs, count = divmod(count, per_epoch)
        return self._advance(epoch + 1 + epochs, (), count)

    # -- arithmetic ------------------------------------------------------------------------------

    def _shards(self, rank: int) -> list[Shard]:
        w, k = self.world_size, self._plan.workers
        return [Shard(rank, w, i, k) for i in range(k)]

    def _runs(self, shard: Shard, consumed: Ranges) -> list[range]:
        src = self._plan.source
        shard_or_none = shard if src.shards_itself else None
        return leftover_runs(self.size, consumed, shard_or_none, src.remainder, self.units)

    def _rank_lengths(
        self, rank: int, consumed: Ranges
    ) -> tuple[int, list[int], list[int], list[list[range]]]:
        """(datapoints out of df, runner datapoints per worker, items per worker, runs per worker)."""
        runs = [self._runs(s, consumed) for s in self._shards(rank)]
        items = [sum(len(r) for r in rr) for rr in runs]
        per_worker = [batches_up(n, self._plan.inner) for n in items]
        return batches_up(sum(per_worker), self._plan.outer), per_worker, items, runs

    def _length(self, epoch: int, consumed: Ranges) -> int:
        """This rank's datapoints of df in the epoch that continues ``consumed``."""
        del epoch  # lengths do not depend on the epoch's order
        if consumed:
            return self._rank_lengths(self.rank, consumed)[0]
        if self._fresh is None:
            self._fresh = self._rank_lengths(self.rank, ())[0]
        return self._fresh

    def _advance(self, epoch: int, consumed: Ranges, count: int) -> DataPosition:
        """The position after every rank consumed ``count`` datapoints (at most its own) of the epoch."""
        src = self._plan.source
        done = list(consumed)
        for rank in range(self.world_size):
            total, per_worker, items, runs = self._rank_lengths(rank, consumed)
            taken = batches_down(min(count, total), sum(per_worker), self._plan.outer)
            for shard, d, n, rr in zip(
                self._shards(rank), round_robin_counts(per_worker, taken), items, runs, strict=True
            ):
                k = batches_down(d, n, self._plan.inner)
                if k:
                    done.extend(_emitted_ranges(src, epoch, shard if src.shards_itself else Shard(), rr, k))
        return DataPosition.of(epoch, self.size, done)


def _emitted_ranges(
    source: Any, epoch: int, shard: Shard, runs: list[range], count: int
) -> list[tuple[int, int]]:
    """The order positions of the first ``count`` items ``source`` yields reading ``runs``."""
    emitted = source.emitted_positions(epoch, shard, runs, count)
    if emitted is not None:
        return ranges_of(np.sort(np.asarray(emitted, dtype=np.int64)))
    out = []
    for r in runs:  # a prefix of the runs
        take = min(count, len(r))
        if take:
            out.append((r.start, r.start + take))
        count -= take
        if not count:
            break
    return out
