"""ShardData: split a dataflow across the ranks of a data-parallel job."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from .base import DataFlow, ProxyDataFlow

__all__ = ["ShardData"]


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"ShardData: environment variable {name}={value!r} is not an integer") from None


class ShardData(ProxyDataFlow):
    """Keep every ``world_size``-th datapoint starting at ``rank``.

    Together, ranks ``0 .. world_size-1`` iterating the same input in the same order see every
    datapoint exactly once per epoch. ``rank`` and ``world_size`` default to the launcher's
    ``RANK`` and ``WORLD_SIZE`` variables (0 and 1 without a launcher). The input must yield the
    same order in every rank: shuffle after sharding, or seed the shuffle identically.

    Ranks may get lengths that differ by one; ``drop_remainder=True`` trims every rank to
    ``len(ds) // world_size`` so that all ranks run the same number of steps.
    """

    def __init__(
        self,
        ds: DataFlow,
        rank: int | None = None,
        world_size: int | None = None,
        drop_remainder: bool = False,
    ) -> None:
        super().__init__(ds)
        self.world_size = _env_int("WORLD_SIZE", 1) if world_size is None else int(world_size)
        self.rank = _env_int("RANK", 0) if rank is None else int(rank)
        if self.world_size < 1:
            raise ValueError(f"ShardData: world_size must be >= 1, got {self.world_size}")
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"ShardData: rank {self.rank} is outside [0, {self.world_size})")
        self.drop_remainder = drop_remainder

    def __len__(self) -> int:
        full, rest = divmod(len(self.ds), self.world_size)
        if self.drop_remainder:
            return full
        return full + int(self.rank < rest)

    def __iter__(self) -> Iterator[Any]:
        limit = len(self) if self.drop_remainder else None
        count = 0
        for i, dp in enumerate(self.ds):
            if i % self.world_size == self.rank:
                if limit is not None and count >= limit:
                    return
                count += 1
                yield dp
