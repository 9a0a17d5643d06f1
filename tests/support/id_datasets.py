"""Datasets whose items are their ids, for the exact-position tests: an in-memory one and a reader
(shuffled by blocks and a shuffle buffer). A datapoint is ``[id]``, or ``[id, data epoch]`` with
``with_epoch``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from towerpack.dataflow.dataset.base import ArrayDataset
from towerpack.dataflow.formats.reader import DatasetReader

__all__ = ["IdRecords", "Ids"]


class Ids(ArrayDataset):
    """Items 0..n-1 in a shuffled (seed, epoch) order."""

    _columns = ("ids",)

    def __init__(self, n: int, with_epoch: bool = False, **order: Any) -> None:
        self.ids = np.arange(n)
        self.with_epoch = with_epoch
        self._init_order(True, training=True, **order)

    def _get(self, index: int) -> list:
        return [self.ids[index], np.int64(self._epoch)] if self.with_epoch else [self.ids[index]]


class IdRecords(DatasetReader):
    """A reader of records 0..n-1."""

    def __init__(self, n: int, with_epoch: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.n = n
        self.with_epoch = with_epoch

    def _count(self) -> int:
        return self.n

    def _read_run(self, start: int, stop: int) -> Iterator[Any]:
        for i in range(start, stop):
            yield [np.int64(i), np.int64(self._epoch)] if self.with_epoch else [np.int64(i)]
