"""PositionTracker: the exact data position of one rank's pipeline, from the datapoints it consumed.

It walks the pipeline down to its source (batches, 1:1 maps, at most one runner; anything else is
refused by name), starts the source's copies at a :class:`~towerpack.dataflow.position.DataPosition`,
and turns a count of datapoints trained on into the position a checkpoint records. The arithmetic
of positions and of how what is left of an epoch is split lives in :mod:`towerpack.dataflow.position`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .batch import BatchData, BatchDataByShape
from .mapping import MapData
from .parallel import MultiProcessRunnerZMQ, MultiThreadRunner
from .position import (
    DataPosition,
    PositionSource,
    PositionUnsupportedError,
    Ranges,
    Tracking,
    Units,
    _Batch,
    _down,
    _up,
    leftover_runs,
    round_robin_counts,
)
from .remote import RemoteDataZMQ
from .sharding import Shard, dataflow_tree

__all__ = ["PositionTracker"]


@dataclass
class _Plan:
    """What one rank's pipeline looks like to the tracker (see :meth:`PositionTracker.of`)."""

    source: Any  # the representative source (its order, size, shard)
    sources: list[Any]  # every copy of the source in the tree (one per thread for MultiThreadRunner)
    runners: list[Any]
    workers: int
    inner: list[_Batch]  # batches inside the workers, innermost first
    outer: list[_Batch]  # batches after the runner, innermost first


class PositionTracker:
    """Tracks the exact data position of one rank's dataflow; see the module docstring.

    Make it with :meth:`of` before ``reset_state``, call :meth:`start`, then ``reset_state`` and
    iterate as usual; :meth:`position` turns the count of datapoints trained on into a
    :class:`DataPosition` for the checkpoint.
    """

    def __init__(self, plan: _Plan, rank: int, world_size: int) -> None:
        self._plan = plan
        self.rank = rank
        self.world_size = world_size
        self._start: DataPosition | None = None
        self._fresh: int | None = None
        inner = int(np.prod([b.size for b in plan.inner]))
        self.units = Units(inner * int(np.prod([b.size for b in plan.outer])), inner)

    @classmethod
    def of(cls, df: Any) -> PositionTracker:
        """The tracker of ``df``, the rank's top dataflow (what the trainer iterates).

        Raises :class:`PositionUnsupportedError` naming the first stage whose datapoints are not a
        deterministic function of the epoch order (see docs: "Exact resume").
        """
        plan = _analyze(df)
        shard = plan.source.shard() if plan.source.shards_itself else Shard()
        return cls(plan, shard.rank, shard.world_size)

    @property
    def size(self) -> int:
        """Items in the dataset (all ranks together)."""
        return int(self._plan.source._count())

    def start(self, position: DataPosition | None = None) -> None:
        """Make the first epoch iterated continue ``position`` (None: epoch 1 from its start).

        Call before ``reset_state`` of the dataflow: the sources and runners in it are switched to
        tracking mode, which reaches forked and spawned workers with the dataflow itself.
        """
        position = DataPosition(1, self.size) if position is None else position
        if not isinstance(position, DataPosition):
            raise TypeError(f"start(): expected a DataPosition or None, got {type(position).__name__}")
        position.check_size(self.size, f"the dataset {type(self._plan.source).__name__}")
        for runner in self._plan.runners:
            if getattr(runner, "_group", None) is not None or getattr(runner, "_threads", None):
                raise RuntimeError(
                    f"PositionTracker.start() must come before {type(runner).__name__}.reset_state()"
                )
        for source in self._plan.sources:
            source._start_at(position, self.units)
        for runner in self._plan.runners:
            runner._tracking = Tracking(tuple(self._plan.inner))
        self._start = position

    def datapoints_per_epoch(self) -> int:
        """This rank's datapoints (of ``df``) in a whole epoch."""
        return self._length(1, ())

    def remaining(self, position: DataPosition) -> int:
        """This rank's datapoints (of ``df``) still to read in the epoch that continues ``position``."""
        position.check_size(self.size)
        return self._length(position.epoch, position.consumed)

    def position(self, datapoints_consumed: int) -> DataPosition:
        """The position after this rank consumed ``datapoints_consumed`` datapoints of ``df`` since
        :meth:`start` (across epoch boundaries). Pure arithmetic, no I/O."""
        if self._start is None:
            raise RuntimeError("PositionTracker.position(): call start() first")
        count = int(datapoints_consumed)
        if count < 0:
            raise ValueError(f"datapoints_consumed must be >= 0, got {datapoints_consumed}")
        epoch, consumed = self._start.epoch, self._start.consumed
        left = self._length(epoch, consumed)
        if count < left or count == 0:
            return self._advance(epoch, consumed, count)
        count -= left
        per_epoch = self.datapoints_per_epoch()
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
        per_worker = [_up(n, self._plan.inner) for n in items]
        return _up(sum(per_worker), self._plan.outer), per_worker, items, runs

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
            taken = _down(min(count, total), sum(per_worker), self._plan.outer)
            for shard, d, n, rr in zip(
                self._shards(rank), round_robin_counts(per_worker, taken), items, runs, strict=True
            ):
                k = _down(d, n, self._plan.inner)
                if k:
                    done.extend(_emitted_ranges(src, epoch, shard if src.shards_itself else Shard(), rr, k))
        return DataPosition.of(epoch, self.size, done)


def _emitted_ranges(
    source: Any, epoch: int, shard: Shard, runs: list[range], count: int
) -> list[tuple[int, int]]:
    """The order positions of the first ``count`` items ``source`` yields reading ``runs``."""
    emitted = getattr(source, "_emitted_positions", None)
    if emitted is not None:
        positions = np.sort(np.asarray(emitted(epoch, shard, runs, count), dtype=np.int64))
        if not len(positions):
            return []
        breaks = np.flatnonzero(np.diff(positions) != 1) + 1
        starts = positions[np.concatenate([[0], breaks])]
        stops = positions[np.concatenate([breaks - 1, [len(positions) - 1]])] + 1
        return list(zip(starts.tolist(), stops.tolist(), strict=True))
    out = []
    for r in runs:  # a prefix of the runs
        take = min(count, len(r))
        if take:
            out.append((r.start, r.start + take))
        count -= take
        if not count:
            break
    return out


def _analyze(df: Any) -> _Plan:
    """Walk ``df`` down to its source: batches, 1:1 stages, at most one runner; refuse the rest."""
    outer: list[_Batch] = []
    inner: list[_Batch] = []
    runners: list[Any] = []
    workers = 1
    copies: list[Any] = [df]
    node = df
    while True:
        name = type(node).__name__
        if isinstance(node, PositionSource):
            break
        if isinstance(node, BatchData) and not isinstance(node, BatchDataByShape):
            (inner if runners else outer).insert(0, _Batch(node.batch_size, bool(node.remainder)))
            node = node.ds
        elif isinstance(node, MapData):  # 1:1 unless its function returns None (checked by the runner)
            node = node.ds
        elif isinstance(node, (MultiProcessRunnerZMQ, MultiThreadRunner)):
            if runners:
                raise PositionUnsupportedError(
                    f"exact data position: a runner ({name}) inside another runner is not supported"
                )
            runners.append(node)
            if isinstance(node, MultiThreadRunner):
                workers = node.num_thread
                copies = list(node.dfs)  # one pipeline per thread: each copy's source continues the position
                node = node.dfs[0]
            else:
                workers = node.num_proc
                node = node.ds
        elif isinstance(node, RemoteDataZMQ):
            raise PositionUnsupportedError(
                f"exact data position: {name} (data from `dataflow serve` servers or other producers) is "
                "not supported: run the pipeline in the trainer's processes to resume mid-epoch"
            )
        else:
            raise PositionUnsupportedError(
                f"exact data position: the stage {name} is not supported (it may drop, repeat or "
                "reorder datapoints, or read a source whose order is not a function of the seed and "
                "epoch); supported: IndexedDataset and DatasetReader sources, MapData, BatchData, "
                "MultiProcessRunnerZMQ, MultiThreadRunner"
            )
    source = node
    if not source.shards_itself and workers > 1:
        raise PositionUnsupportedError(
            f"exact data position: {type(source).__name__} does not shard itself (shard=False), so each of "
            f"the {workers} workers would read all of it"
        )
    sources = [d for c in copies for d in dataflow_tree(c) if isinstance(d, PositionSource)]
    return _Plan(source, sources, runners, workers, inner, outer)
