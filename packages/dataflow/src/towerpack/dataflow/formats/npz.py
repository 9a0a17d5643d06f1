"""Datasets in one ``.npz`` file: every datapoint as a wire-format record, no pickle (NumpySerializer)."""

from __future__ import annotations

import os
import tokenize
import zipfile
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..pipeline.progress import progress_bar
from ..wire.codec import WireFormatError, pack, unpack
from .errors import DatasetFormatError
from .reader import DatasetReader

__all__ = ["NpzRecords", "write_npz"]


def write_npz(df: Any, path: str | os.PathLike, allow_pickle: bool = False, progress: bool = True) -> int:
    """Write one epoch of ``df`` into a compressed ``.npz``: ``records`` (bytes) and ``offsets``.

    The records are :func:`~towerpack.dataflow.wire.codec.pack` byte strings laid end to end; the file
    holds no object array, so it loads without pickle.
    """

    df.reset_state()
    records = [pack(dp, allow_pickle) for dp in progress_bar(iterable=df, unit="dp", disable=not progress)]
    offsets = np.cumsum([0] + [len(r) for r in records], dtype=np.int64)
    np.savez_compressed(os.fspath(path), records=np.frombuffer(b"".join(records), np.uint8), offsets=offsets)
    return len(records)


#: What numpy and zipfile raise for a damaged ``.npz`` (tokenize's error: a damaged ``.npy`` header).
_DAMAGED_ZIP = (
    OSError,
    ValueError,
    EOFError,
    KeyError,
    NotImplementedError,
    SyntaxError,
    tokenize.TokenError,
    zipfile.BadZipFile,
    zlib.error,
)


class NpzRecords(DatasetReader):
    """The datapoints of a file written by :func:`write_npz`, loaded into memory once."""

    def __init__(self, path: str | os.PathLike, shuffle: bool = True, allow_pickle: bool = False, **kw: Any):
        super().__init__(shuffle, **kw)
        self.path = os.fspath(path)
        self.allow_pickle = allow_pickle
        try:
            with np.load(self.path, allow_pickle=False) as f:
                files = set(f.files)
                if files == {"records", "offsets"}:
                    self._records = f["records"]
                    self._offsets = f["offsets"]
        except _DAMAGED_ZIP as e:
            # a truncated or damaged zip (zip members carry a CRC-32, checked as they are read)
            raise DatasetFormatError(
                f"{self.path}: not a readable npz file ({type(e).__name__}: {e})"
            ) from None
        if files != {"records", "offsets"}:
            raise DatasetFormatError(f"{self.path} is not a towerpack npz dataset (it holds {sorted(files)})")
        offsets, records = self._offsets, self._records
        if (
            offsets.ndim != 1
            or offsets.dtype.kind not in "iu"
            or records.ndim != 1
            or len(offsets) < 1
            or offsets[0] != 0
            or offsets[-1] != len(records)
            or np.any(np.diff(offsets) < 0)
        ):
            raise DatasetFormatError(f"{self.path}: the offsets do not match the records")

    def _count(self) -> int:
        return len(self._offsets) - 1

    def _read_run(self, start: int, stop: int) -> Iterator[Any]:
        for i in range(start, stop):
            # A copy per datapoint: its arrays are writable and do not keep the whole file alive.
            record = bytearray(self._records[self._offsets[i] : self._offsets[i + 1]])
            try:
                dp = unpack(record, self.allow_pickle)
            except WireFormatError as e:
                raise DatasetFormatError(f"{self.path}: record {i} is not a datapoint: {e}") from None
            yield dp
