"""DatasetReader: the base of the on-disk readers (LMDB, TFRecord, HDF5, npz records).

A dataset of ``n`` records is read in runs of consecutive records, which is what keeps reads
sequential on disk. Each epoch:

1. the epoch's order is the records cut into blocks of ``block_size`` consecutive records,
   in storage order, or (``shuffle=True``) in an order of blocks drawn from ``(seed, epoch)``, the
   same in every process of the job;
2. this process keeps its shard of that order (see :mod:`towerpack.dataflow.pipeline.sharding`): a
   consecutive piece per rank, split among the rank's workers, with the ranks' shares made
   equal by ``remainder``;
3. it reads its piece run by run and, with ``shuffle=True``, passes the records through a
   shuffle buffer of ``shuffle_buffer`` records (flushed at the end of the epoch).

So the ranks and workers of a job together read every record of an epoch once (``remainder``
aside), deterministically for a given ``seed``. The shuffle buffer of a worker is seeded from
``(seed, epoch, rank, worker)``, so a :class:`~towerpack.dataflow.resume.tracker.PositionTracker` can
replay it on positions to know which records a worker has yielded (in tag mode the records go
through it with their positions instead). Subclasses open their file in :meth:`_open`
(called by ``reset_state``, in the process that reads), tell the record count in :meth:`_count`
and read a run in :meth:`_read_run`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..pipeline.base import DataFlow
from ..pipeline.sharding import Remainder, SelfSharding, Shard
from ..resume.source import PositionSource

__all__ = ["BLOCK_SIZE", "SHUFFLE_BUFFER", "DatasetReader"]

#: Records per block: the unit of the shuffled epoch order, read sequentially.
BLOCK_SIZE = 256
#: Records in the shuffle buffer of a shuffling reader.
SHUFFLE_BUFFER = 1024
#: Buffer slots drawn at once by the shuffle buffer.
_PICKS = 4096
#: The seed of the epoch order when none is given: every process of a job must agree on it.
DEFAULT_SEED = 0


class DatasetReader(PositionSource, SelfSharding, DataFlow):
    """Read a dataset's records in sharded, sequential runs; see the module docstring.

    Args:
        shuffle: shuffle the order of blocks each epoch, and records through a shuffle buffer.
        shard: read only this process's shard (rank and worker); ``False`` reads everything.
        remainder: how the ranks' shares are made equal: ``"pad"``, ``"drop"`` or ``"uneven"``.
        seed: the seed of the epoch orders (the same in every process of a job).
        block_size: records per block of the shuffled order.
        shuffle_buffer: records in the shuffle buffer.
        rank, world_size: override the rank and world size of this process's ``placement()``.
    """

    def __init__(
        self,
        shuffle: bool = True,
        *,
        shard: bool = True,
        remainder: Remainder | str = Remainder.PAD,
        seed: int = DEFAULT_SEED,
        block_size: int = BLOCK_SIZE,
        shuffle_buffer: int = SHUFFLE_BUFFER,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        if block_size < 1 or shuffle_buffer < 1:
            raise ValueError(f"{type(self).__name__}: block_size and shuffle_buffer must be >= 1")
        self.shuffle = shuffle
        self.shards_itself = shard
        self.remainder = Remainder.parse(remainder)
        self.seed = int(seed)
        self.block_size = int(block_size)
        self.shuffle_buffer = int(shuffle_buffer)
        self.rank, self.world_size = rank, world_size
        if shard:
            Shard.current(rank, world_size)  # a bad placement or override fails here, not in a worker
        self._epoch = 0
        self._opened = False

    # -- for subclasses --------------------------------------------------------------------------

    def _open(self) -> None:
        """Open the file(s) for reading, in the process that iterates."""

    def _count(self) -> int:
        raise NotImplementedError

    def _read_run(self, start: int, stop: int) -> Iterator[Any]:
        """Yield records ``start .. stop - 1`` in storage order."""
        raise NotImplementedError

    # -- the DataFlow ----------------------------------------------------------------------------

    def reset_state(self) -> None:
        self._open()
        self._opened = True
        self._epoch = self._first_epoch()

    def record_runs(self, epoch: int) -> list[tuple[int, int]]:
        """``(start, stop)`` record runs this process reads in epoch ``epoch`` (from 1), in order."""
        n = self._count()
        if n == 0:
            return []
        starts = np.arange(0, n, self.block_size)
        if self.shuffle:
            starts = np.random.default_rng((self.seed, epoch)).permutation(starts)
        ends = np.minimum(starts + self.block_size, n)
        cum = np.concatenate([[0], np.cumsum(ends - starts)])  # order position of each block's start
        runs: list[tuple[int, int]] = []
        for piece in self._epoch_runs(n, self._consumed(epoch)):
            pos = piece.start
            while pos < piece.stop:
                b = int(np.searchsorted(cum, pos, side="right")) - 1
                offset = pos - int(cum[b])
                take = min(int(ends[b] - starts[b]) - offset, piece.stop - pos)
                runs.append((int(starts[b]) + offset, int(starts[b]) + offset + take))
                pos += take
        return runs

    def __iter__(self) -> Iterator[Any]:
        if not self._opened:
            raise RuntimeError(f"{type(self).__name__}: call reset_state() before iterating")
        self._epoch += 1
        runs = self.record_runs(self._epoch)
        self.items_read = sum(stop - start for start, stop in runs)
        records = (r for start, stop in runs for r in self._read_run(start, stop))
        if self._tagging:  # the records in pairs with their positions (PositionTracker's tag mode)
            pieces = self._epoch_runs(self._count(), self._consumed(self._epoch))
            records = zip((p for r in pieces for p in r), records, strict=True)
        if self.shuffle:
            rng = self._buffer_rng(epoch=self._epoch, shard=self.shard())
            records = _shuffle_buffer(records, self.shuffle_buffer, rng)
        yield from self._tag_pairs(self._epoch, records) if self._tagging else records

    def _buffer_rng(self, epoch: int, shard: Shard) -> np.random.Generator:
        return np.random.default_rng((self.seed, epoch, shard.rank, shard.worker, 1))

    def emitted_positions(self, epoch: int, shard: Shard, runs: list[range], count: int) -> list[int]:
        """The order positions of the first ``count`` records yielded when reading ``runs``."""
        positions = [p for r in runs for p in r]
        if not self.shuffle:
            return positions[:count]
        return buffer_emissions(positions, self.shuffle_buffer, self._buffer_rng(epoch, shard), count)


def buffer_emissions(items: list[Any], size: int, rng: np.random.Generator, count: int) -> list[Any]:
    """The first ``count`` items :func:`_shuffle_buffer` yields from ``items`` (the same draws, faster:
    a tracker replays every worker's buffer on positions at each checkpoint)."""
    steps = max(0, len(items) - size)  # items that replace a yielded one
    taken = min(count, steps)
    chunks = -(-(steps if count > steps else taken) // _PICKS)
    picks = [v for _ in range(chunks) for v in rng.integers(size, size=_PICKS).tolist()]  # as drawn there
    buf = items[:size]
    out = []
    for j in range(taken):
        i = picks[j]
        out.append(buf[i])
        buf[i] = items[size + j]
    if count > steps:
        rng.shuffle(buf)
        out += buf[: count - steps]
    return out


def _shuffle_buffer(items: Iterator[Any], size: int, rng: np.random.Generator) -> Iterator[Any]:
    """``items`` through a shuffle buffer of ``size``, flushed (shuffled) at the end.

    The buffer's slots are drawn in chunks: the same draws whether records or positions go through.
    """
    buf: list[Any] = []
    picks: list[int] = []
    for r in items:
        if len(buf) < size:
            buf.append(r)
            continue
        if not picks:
            picks = rng.integers(size, size=_PICKS).tolist()[::-1]
        i = picks.pop()
        yield buf[i]
        buf[i] = r
    rng.shuffle(buf)
    yield from buf
