"""Replaying a position: the arithmetic by which one rank knows what every rank read.

For ranks that cannot share what they trained on (:mod:`towerpack.dataflow.resume.tracker`), one
rank computes every rank's items from a count of datapoints: every worker yields its part in a
deterministic order (a reader's shuffle buffer is seeded per worker, so it can be replayed on
positions), the runner merges its workers strictly round-robin (:func:`round_robin_counts`), and
batches turn counts of items into counts of datapoints (:func:`batches_up`, :func:`batches_down`);
:class:`Tracking` checks in the workers that no stage drops or adds datapoints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..pipeline.sharding import dataflow_tree
from .protocol import Batch, PositionUnsupportedError
from .source import PositionSource

__all__ = ["Tracking", "batches_down", "batches_up", "round_robin_counts"]


def batches_up(n: int, batches: Sequence[Batch]) -> int:
    """Datapoints out of ``batches`` (innermost first) from ``n`` datapoints in."""
    for b in batches:
        n = b.up(n)
    return n


@dataclass(frozen=True)
class Tracking:
    """What a runner in tracking mode knows of its workers' pipelines: the batches in them, to check
    that every pass yields the datapoints its items make (no stage dropped or added any)."""

    inner: tuple[Batch, ...]

    def check_pass(self, ds: Any, produced: int) -> None:
        """Raise when a worker's pass over ``ds`` yielded another number of datapoints than planned."""
        source = next(d for d in dataflow_tree(ds) if isinstance(d, PositionSource))
        expected = batches_up(source.items_read, self.inner)
        if produced != expected:
            raise PositionUnsupportedError(
                f"exact data position: a worker's pass read {source.items_read} items of "
                f"{type(source).__name__} but its pipeline yielded {produced} datapoints instead of "
                f"{expected}: a stage drops or adds datapoints (a MapData whose function returns None?)"
            )


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


def batches_down(count: int, n: int, batches: Sequence[Batch]) -> int:
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
