"""IndexedList: the items of a list in a ``(seed, epoch)`` order, sharded, resumable exactly.

What ``DataFromList`` is for a job that resumes mid-epoch (``TrainConfig(exact_resume=True)``) or
runs in several ranks or workers: each epoch's order is drawn from ``(seed, epoch)`` alone, every
process keeps its part of it, and each item has a position in that order (see
:class:`~towerpack.dataflow.dataset.base.IndexedDataset`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import IndexedDataset

__all__ = ["IndexedList"]


class IndexedList(IndexedDataset):
    """Yield the items of ``lst``, in a new order each epoch when ``shuffle``; this process's part.

    The keyword arguments are :class:`IndexedDataset`'s: ``shard=None`` (shard: True here),
    ``seed=0``, ``remainder="pad"``, ``rank``/``world_size`` overrides.
    """

    def __init__(self, lst: Sequence[Any], shuffle: bool = True, **order: Any) -> None:
        self.lst = lst
        self._init_order(shuffle, training=True, **order)

    def _count(self) -> int:
        return len(self.lst)

    def _get(self, index: int) -> Any:
        return self.lst[index]
