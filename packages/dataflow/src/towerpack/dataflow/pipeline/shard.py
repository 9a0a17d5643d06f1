"""ShardData: keep this rank's and this worker's part of a dataflow, the same number on every rank."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .base import DataFlow, LengthUnknownError, ProxyDataFlow, RNGDataFlow, dataflow_len
from .sharding import Remainder, Shard, dataflow_tree
from .sources import RESUMABLE_SOURCES

__all__ = ["ShardData"]

#: The seed ShardData gives to random dataflows it reads from that have none of their own.
DEFAULT_SEED = 0


class ShardData(ProxyDataFlow):
    """Keep the datapoints of one shard: rank ``rank`` of ``world_size``, and the current worker's part.

    Every process of a job iterates the same input; stream position ``p`` (in each epoch) belongs
    to rank ``p % world_size`` and, within it, to worker ``(p // world_size) % num_workers``. The
    ranks and workers together see every datapoint of an epoch once. ``rank`` and ``world_size``
    default to this process's :func:`placement`; the worker is the one this process is
    inside a runner (see :mod:`towerpack.dataflow.pipeline.sharding`).

    Every process must see the input in the same order. Random dataflows the input is made of
    (``RNGDataFlow``: ``DataFromList(shuffle=True)``, ``LocallyShuffleData`` ...) that have no
    ``seed`` of their own get ``seed`` at :meth:`reset_state`, so they shuffle alike in every
    process (and differently each epoch). Randomness meant to differ (augmentation) goes after
    ShardData.

    ``remainder`` makes the ranks' shares equal
    (see :class:`~towerpack.dataflow.pipeline.sharding.Remainder`):
    ``"pad"`` (default) gives every rank ``ceil(n / world_size)`` datapoints, re-using the first
    ones of the epoch; ``"drop"`` gives ``n // world_size``; ``"uneven"`` keeps each datapoint
    exactly once, so ranks may differ by one, which a synchronous trainer cannot take. ``"pad"``
    and ``"drop"`` need the input's length. ``drop_remainder=True`` is ``remainder="drop"``.
    """

    resume_refusal = (
        "it splits a stream that every process reads whole. Use a source that shards itself: "
        + RESUMABLE_SOURCES
    )

    def __init__(
        self,
        ds: DataFlow,
        rank: int | None = None,
        world_size: int | None = None,
        drop_remainder: bool = False,
        *,
        remainder: Remainder | str = Remainder.PAD,
        seed: int = DEFAULT_SEED,
    ) -> None:
        super().__init__(ds)
        shard = Shard.current(rank, world_size)  # validates now, in the process that builds it
        self.rank, self.world_size = shard.rank, shard.world_size
        self.remainder = Remainder.DROP if drop_remainder else Remainder.parse(remainder)
        self.seed = seed
        for d in dataflow_tree(ds):
            if getattr(d, "shards_itself", False):
                raise ValueError(
                    f"ShardData: {type(d).__name__} already reads only this process's shard; "
                    f"remove ShardData or pass shard=False to {type(d).__name__}"
                )

    def _shard(self) -> Shard:
        return Shard.current(self.rank, self.world_size)

    def reset_state(self) -> None:
        for d in dataflow_tree(self.ds):
            if isinstance(d, RNGDataFlow) and d.seed is None:
                d.seed = self.seed
        super().reset_state()

    def _input_length(self) -> int:
        length = dataflow_len(self.ds)
        if length is None:
            raise LengthUnknownError(
                f"ShardData(remainder={self.remainder.value!r}) needs the input's length to give every "
                f"rank the same count; {type(self.ds).__name__} has none: pass remainder='uneven' "
                "(ranks then differ by at most one datapoint)"
            )
        return length

    def __len__(self) -> int:
        return self._shard().length(len(self.ds), self.remainder)

    def __iter__(self) -> Iterator[Any]:
        shard = self._shard()
        if shard.trivial:
            yield from self.ds
            return
        if self.remainder is Remainder.UNEVEN:
            for i, dp in enumerate(self.ds):
                if shard.keeps(i):
                    yield dp
            return
        n = self._input_length()
        total = self.remainder.epoch_length(n, shard.world_size)
        head: list[Any] = []  # padding re-uses the first total - n datapoints
        count = 0
        for dp in self.ds:
            if count >= total:
                break
            if count < total - n:
                head.append(dp)
            if shard.keeps(count):
                yield dp
            count += 1
        if count < min(n, total):
            raise RuntimeError(f"ShardData: the input yielded {count} datapoints but its length is {n}")
        for j, dp in enumerate(head):
            if shard.keeps(n + j):
                yield dp
