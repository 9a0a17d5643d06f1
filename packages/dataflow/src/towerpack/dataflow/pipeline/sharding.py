"""The sharding contract: which part of an epoch each process reads, so that all parts make one epoch.

A process that iterates a dataflow knows two things about itself:

- its **worker** index and count, set by the runner that started it (:class:`MultiProcessRunnerZMQ`,
  ``dataflow serve --workers``, :class:`MultiThreadRunner`); one worker, index 0, elsewhere.
  :func:`get_worker_info` returns it, as torch's function of that name does;
- its **rank** and world size: what :func:`~towerpack.utils.placement.placement` reads from
  whichever launcher started it (one rank without a launcher), or what :func:`set_rank_info`
  (``dataflow serve --shard I/N``) says.

Readers and :class:`ShardData` split the ``n`` datapoints of an epoch first among the ranks, then
among the workers of each rank. How the ranks' shares are made equal is a :class:`Remainder`
policy: synchronous trainers need every rank to run the same number of steps.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from towerpack.utils.placement import placement

__all__ = [
    "RankInfo",
    "Remainder",
    "SelfSharding",
    "Shard",
    "WorkerInfo",
    "dataflow_tree",
    "get_worker_info",
    "set_rank_info",
]


@dataclass(frozen=True)
class WorkerInfo:
    """This process's (or thread's) place among the workers running copies of one dataflow."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"worker index {self.index} is outside [0, {self.count})")


@dataclass(frozen=True)
class RankInfo:
    """This process's place among the ranks of a data-parallel job."""

    rank: int
    world_size: int

    def __post_init__(self) -> None:
        if self.world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {self.world_size}")
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} is outside [0, {self.world_size})")

    @classmethod
    def from_env(cls) -> RankInfo:
        """The rank and world size of this process's :func:`placement` (0 of 1 without a launcher)."""
        where = placement()
        return cls(where.rank, where.world_size)


_thread_worker = threading.local()
_process_worker: WorkerInfo | None = None
_rank_override: RankInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """The worker this process (or thread) is, inside a runner's workers; None elsewhere."""
    return getattr(_thread_worker, "info", None) or _process_worker


def set_worker_info(info: WorkerInfo | None, thread_only: bool = False) -> None:
    """Called by runners in each worker before it resets its dataflow."""
    global _process_worker
    if thread_only:
        _thread_worker.info = info
    else:
        _process_worker = info


def set_rank_info(rank: int, world_size: int) -> None:
    """Make this process read shard ``rank`` of ``world_size`` whatever its placement says.

    For data servers outside a launcher: two servers started with ``--shard 0/2`` and
    ``--shard 1/2`` serve the two halves of every epoch.
    """
    global _rank_override
    _rank_override = RankInfo(int(rank), int(world_size))


def current_rank() -> RankInfo:
    """The :func:`set_rank_info` override if there is one, else this process's placement."""
    return _rank_override or RankInfo.from_env()


class Remainder(enum.Enum):
    """How the ranks' shares of an epoch of ``n`` datapoints are made equal.

    - ``UNEVEN``: every datapoint exactly once; ranks get ``n // world`` or one more.
    - ``PAD``: every rank gets ``ceil(n / world)``; the first datapoints of the epoch's order are
      used again to fill up (every datapoint at least once, at most ``world - 1`` twice).
    - ``DROP``: every rank gets ``n // world``; the last ``n % world`` datapoints of the epoch's
      order are skipped (a different few each epoch when the order is shuffled).
    """

    UNEVEN = "uneven"
    PAD = "pad"
    DROP = "drop"

    @classmethod
    def parse(cls, value: Remainder | str) -> Remainder:
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            names = ", ".join(repr(m.value) for m in cls)
            raise ValueError(f"remainder must be one of {names}, got {value!r}") from None

    def epoch_length(self, n: int, world_size: int) -> int:
        """Datapoints in an epoch across all ranks (padding counted)."""
        if self is Remainder.PAD:
            return -(-n // world_size) * world_size
        if self is Remainder.DROP:
            return n // world_size * world_size
        return n


def _split(start: int, length: int, parts: int, index: int) -> tuple[int, int]:
    """``(start, length)`` of part ``index`` when ``length`` items are split into ``parts`` runs."""
    q, r = divmod(length, parts)
    return start + index * q + min(index, r), q + (index < r)


@dataclass(frozen=True)
class Shard:
    """One process's part of an epoch: a rank of ``world_size``, and a worker of ``num_workers`` in it."""

    rank: int = 0
    world_size: int = 1
    worker: int = 0
    num_workers: int = 1

    @classmethod
    def current(cls, rank: int | None = None, world_size: int | None = None) -> Shard:
        """This process's shard; ``rank``/``world_size`` override its placement's values."""
        if rank is not None and world_size is not None:
            ranks = RankInfo(int(rank), int(world_size))  # the environment does not matter then
        else:
            ranks = current_rank()
            if rank is not None or world_size is not None:
                ranks = RankInfo(
                    ranks.rank if rank is None else int(rank),
                    ranks.world_size if world_size is None else int(world_size),
                )
        worker = get_worker_info() or WorkerInfo(0, 1)
        return cls(ranks.rank, ranks.world_size, worker.index, worker.count)

    @property
    def trivial(self) -> bool:
        return self.world_size == 1 and self.num_workers == 1

    def rank_length(self, n: int, remainder: Remainder) -> int:
        """Datapoints this rank reads per epoch (all its workers together)."""
        return _split(0, remainder.epoch_length(n, self.world_size), self.world_size, self.rank)[1]

    def length(self, n: int, remainder: Remainder) -> int:
        """Datapoints this worker reads per epoch."""
        return _split(0, self.rank_length(n, remainder), self.num_workers, self.worker)[1]

    def runs(self, n: int, remainder: Remainder) -> list[range]:
        """This worker's positions in the epoch's order, as contiguous runs (for readers).

        The epoch's order is split into consecutive pieces, one per rank, each split again among
        the rank's workers. Padding positions (past ``n``) wrap to the start of the order.
        """
        total = remainder.epoch_length(n, self.world_size)
        start, length = _split(0, total, self.world_size, self.rank)
        start, length = _split(start, length, self.num_workers, self.worker)
        runs, pos, end = [], start, start + length
        while pos < end:  # padding wraps around the order, more than once when n < world_size
            first = pos % n
            take = min(end - pos, n - first)
            runs.append(range(first, first + take))
            pos += take
        return runs

    def keeps(self, position: int) -> bool:
        """Whether this worker keeps stream position ``position`` (interleaved split, for streams)."""
        return (
            position % self.world_size == self.rank
            and position // self.world_size % self.num_workers == self.worker
        )


class SelfSharding:
    """For a dataflow that splits its own epochs by this contract (readers, indexed datasets).

    The dataflow sets ``shards_itself``, ``rank``, ``world_size`` (overrides, or None) and
    ``remainder``, and implements ``_count()``: the datapoints of an epoch, all processes together.
    """

    shards_itself: bool
    rank: int | None
    world_size: int | None
    remainder: Remainder

    def _count(self) -> int:
        raise NotImplementedError

    def shard(self) -> Shard:
        """The shard this process reads (all of it when not sharding)."""
        return Shard.current(self.rank, self.world_size) if self.shards_itself else Shard()

    def __len__(self) -> int:
        """This process's datapoints per epoch."""
        n = self._count()
        return self.shard().length(n, self.remainder) if self.shards_itself else n


def dataflow_tree(df: Any) -> Iterator[Any]:
    """``df`` and every dataflow it reads from (through ``ds``, ``df_lists`` and ``lmdb_data``)."""
    seen: set[int] = set()
    todo = [df]
    while todo:
        d = todo.pop()
        if id(d) in seen:
            continue
        seen.add(id(d))
        yield d
        for attr in ("ds", "lmdb_data"):
            inner = getattr(d, attr, None)
            if inner is not None and hasattr(inner, "__iter__"):
                todo.append(inner)
        for item in getattr(d, "df_lists", None) or []:
            todo.append(item[0] if isinstance(item, tuple) else item)
