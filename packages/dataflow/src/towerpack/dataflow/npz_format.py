"""Datasets in one ``.npz`` file: every datapoint as a wire-format record, no pickle (NumpySerializer)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from .reader import DatasetReader
from .wire import pack, unpack

__all__ = ["NpzRecords", "write_npz"]


def write_npz(df: Any, path: str | os.PathLike, allow_pickle: bool = False, progress: bool = True) -> int:
    """Write one epoch of ``df`` into a compressed ``.npz``: ``records`` (bytes) and ``offsets``.

    The records are :func:`~towerpack.dataflow.wire.pack` byte strings laid end to end; the file
    holds no object array, so it loads without pickle.
    """
    import tqdm

    df.reset_state()
    records = [pack(dp, allow_pickle) for dp in tqdm.tqdm(df, unit="dp", disable=not progress)]
    offsets = np.cumsum([0] + [len(r) for r in records], dtype=np.int64)
    np.savez_compressed(os.fspath(path), records=np.frombuffer(b"".join(records), np.uint8), offsets=offsets)
    return len(records)


class NpzRecords(DatasetReader):
    """The datapoints of a file written by :func:`write_npz`, loaded into memory once."""

    def __init__(self, path: str | os.PathLike, shuffle: bool = True, allow_pickle: bool = False, **kw: Any):
        super().__init__(shuffle, **kw)
        self.path = os.fspath(path)
        self.allow_pickle = allow_pickle
        with np.load(self.path, allow_pickle=False) as f:
            if set(f.files) != {"records", "offsets"}:
                raise ValueError(f"{self.path} is not a towerpack npz dataset (it holds {sorted(f.files)})")
            self._records = f["records"]
            self._offsets = f["offsets"]
        if self._offsets.ndim != 1 or len(self._offsets) < 1 or self._offsets[-1] != len(self._records):
            raise ValueError(f"{self.path}: the offsets do not match the records")

    def _count(self) -> int:
        return len(self._offsets) - 1

    def _read_run(self, start: int, stop: int) -> Iterator[Any]:
        for i in range(start, stop):
            # A copy per datapoint: its arrays are writable and do not keep the whole file alive.
            yield unpack(bytearray(self._records[self._offsets[i] : self._offsets[i + 1]]), self.allow_pickle)
