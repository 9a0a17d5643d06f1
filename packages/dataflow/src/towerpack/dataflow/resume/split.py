"""Which positions of an epoch's order each process reads: the split among ranks and workers.

A fresh epoch is split as :meth:`~towerpack.dataflow.pipeline.sharding.Shard.runs` splits it. What is left of
a stopped one (its positions not consumed, in epoch order) is split the same way but in whole
:class:`Units` (the items one datapoint of a rank's pipeline takes, and of a worker's), so that no
worker gets a partial batch its pipeline would drop (:func:`leftover_runs`). Data servers keep a
fixed part of every whole epoch instead, so that one of several can start again alone
(:func:`fixed_runs`). :func:`dropped_positions` says what ``remainder="drop"`` leaves to no one.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..pipeline.sharding import Remainder, Shard, _split
from .ranges import Ranges, complement

__all__ = ["Units", "dropped_positions", "fixed_runs", "leftover_runs", "unit_runs"]


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
    (and a last partial one) to the first ranks; one rank reads all of it, a last partial chunk too.
    With units of 1 this is ``shard.runs(n, remainder)``.
    """
    if n == 0:
        return []
    if shard.world_size == 1:  # one rank has nothing to even out (nor has it in a fresh epoch)
        remainder = Remainder.UNEVEN
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
    free = complement(consumed, size)
    if shard is None:
        return [range(a, b) for a, b in free]
    if not consumed:
        return shard.runs(size, remainder)
    total = sum(b - a for a, b in free)
    return _map_pieces(free, unit_runs(total, shard, remainder, units))


def _free_ranges(runs: Iterable[range], consumed: Ranges) -> list[tuple[int, int]]:
    """The parts of ``runs`` (in order) not in ``consumed``."""
    out = []
    for r in runs:
        pos = r.start
        i = bisect.bisect_right(consumed, (r.start, float("inf"))) - 1
        i = max(i, 0)
        while pos < r.stop:
            while i < len(consumed) and consumed[i][1] <= pos:
                i += 1
            if i < len(consumed) and consumed[i][0] <= pos:
                pos = consumed[i][1]
                continue
            stop = min(r.stop, consumed[i][0]) if i < len(consumed) else r.stop
            out.append((pos, stop))
            pos = stop
    return out


def _map_pieces(free: Sequence[tuple[int, int]], pieces: Iterable[range]) -> list[range]:
    """``pieces`` of ``0 .. sum of free lengths``, as ranges of the positions in ``free`` (in order)."""
    starts = [0]
    for a, b in free:
        starts.append(starts[-1] + b - a)
    out: list[range] = []
    for piece in pieces:
        pos = piece.start
        while pos < piece.stop:  # map indices to positions, one free range at a time
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


def fixed_runs(
    size: int, consumed: Ranges, shard: Shard, remainder: Remainder, units: Units = Units()
) -> list[range]:
    """The positions ``shard`` reads when its rank keeps a fixed part of every epoch (data servers).

    The rank's part is the one a fresh epoch gives it, whatever is consumed, less what is consumed;
    its workers split what is left of it in whole ``units.worker`` chunks. So one rank (one server of
    several) can start again at a position without the others.
    """
    own = Shard(shard.rank, shard.world_size).runs(size, remainder)
    free = _free_ranges(own, consumed)
    total = sum(b - a for a, b in free)
    workers = Shard(0, 1, shard.worker, shard.num_workers)
    return _map_pieces(free, unit_runs(total, workers, Remainder.UNEVEN, Units(units.worker, units.worker)))


def dropped_positions(size: int, consumed: Ranges, world_size: int, rank_unit: int) -> np.ndarray:
    """The positions of an epoch that no rank reads under ``remainder="drop"``: the tail of what is left
    (in epoch order) beyond the most whole ``rank_unit`` chunks that every rank can have (a fresh epoch:
    beyond ``world_size * (size // world_size)``)."""
    free = complement(consumed, size)
    total = sum(b - a for a, b in free)
    if not consumed:
        kept = size // world_size * world_size
    elif world_size == 1:  # one rank reads all that is left (see unit_runs)
        kept = total
    else:
        kept = total // rank_unit // world_size * world_size * rank_unit
    pieces = _map_pieces(free, [range(kept, total)]) if kept < total else []
    return np.concatenate([np.arange(r.start, r.stop) for r in pieces]) if pieces else np.zeros(0, np.int64)
