"""HDF5Data: read arrays of an HDF5 file (h5py) row by row, sharded and in sequential slabs.

h5py reports a truncated or damaged file as ``OSError`` (sometimes another error) from deep
inside the library; the reader raises :class:`DatasetFormatError` naming the file instead. Files
written by :func:`write_hdf5` carry Fletcher-32 checksums of their data and checksummed metadata
(HDF5 1.10 file format), so a flipped byte is an error rather than a wrong datapoint.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

import h5py
import numpy as np

from ..pipeline.progress import progress_bar
from .errors import DatasetFormatError
from .reader import DatasetReader

__all__ = ["HDF5Data", "write_hdf5"]

#: Rows read from the file at once.
SLAB_ROWS = 256


@contextlib.contextmanager
def _damage_named(path: str) -> Iterator[None]:
    """Raise h5py's errors about an unreadable file as :class:`DatasetFormatError` naming it."""
    try:
        yield
    except (OSError, RuntimeError, ValueError, KeyError) as e:
        if isinstance(e, (FileNotFoundError, DatasetFormatError)):
            raise
        raise DatasetFormatError(f"{path}: not a readable HDF5 file ({type(e).__name__}: {e})") from None


class HDF5Data(DatasetReader):
    """Yield ``[dataset[k] for dataset in data_paths]`` for every row ``k`` of an HDF5 file.

    Unlike the reference, which loads every dataset into memory, rows are read in slabs of
    consecutive rows, sharded and shuffled as :class:`~towerpack.dataflow.formats.reader.DatasetReader`
    says. All datasets must have the same number of rows. The file is opened again in every
    process by :meth:`reset_state`.
    """

    def __init__(
        self,
        filename: str | os.PathLike,
        data_paths: Sequence[str],
        shuffle: bool = True,
        **reader_options: Any,
    ) -> None:
        super().__init__(shuffle, **reader_options)
        self.filename = os.fspath(filename)
        self.data_paths = list(data_paths)
        if not self.data_paths:
            raise ValueError("HDF5Data needs at least one data path")
        self._file: h5py.File | None = None
        with _damage_named(self.filename), h5py.File(self.filename, "r") as f:
            lengths = {}
            for p in self.data_paths:
                if p not in f or not isinstance(f[p], h5py.Dataset):
                    missing = p
                    break
                lengths[p] = len(f[p])
            else:
                missing = None
        if missing is not None:
            raise KeyError(f"{self.filename} has no dataset {missing!r}")
        if len(set(lengths.values())) != 1:
            raise ValueError(f"HDF5Data: the datasets of {self.filename} differ in length: {lengths}")
        self._n = next(iter(lengths.values()))

    def _count(self) -> int:
        return self._n

    def _open(self) -> None:
        if self._file is not None:
            self._file.close()
        with _damage_named(self.filename):
            self._file = h5py.File(self.filename, "r")

    def _read_run(self, start: int, stop: int) -> Iterator[Any]:
        with _damage_named(self.filename):
            sets = [self._file[p] for p in self.data_paths]
        for lo in range(start, stop, SLAB_ROWS):
            hi = min(lo + SLAB_ROWS, stop)
            with _damage_named(self.filename):
                slabs = [d[lo:hi] for d in sets]
            for k in range(hi - lo):
                yield [s[k] for s in slabs]

    def close(self) -> None:
        """Close the file (``reset_state`` opens it again)."""
        if self._file is not None:
            self._file.close()
            self._file = None
            self._opened = False

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_file"] = None  # opened again by reset_state in the process that reads
        return state


def write_hdf5(df: Any, path: str | os.PathLike, data_paths: Sequence[str], progress: bool = True) -> int:
    """Write one epoch of ``df`` as one HDF5 dataset per component (named by ``data_paths``).

    Component ``i`` of every datapoint is stacked into dataset ``data_paths[i]``, so components
    must be arrays or numbers of one shape and dtype. The whole epoch is held in memory first.
    """

    path = os.fspath(path)
    if os.path.exists(path):
        raise FileExistsError(f"{path} already exists")
    df.reset_state()
    columns: list[list[Any]] = [[] for _ in data_paths]
    for dp in progress_bar(iterable=df, unit="dp", disable=not progress, desc=f"reading for {path}"):
        if len(dp) != len(data_paths):
            raise ValueError(
                f"write_hdf5: a datapoint has {len(dp)} components for {len(data_paths)} data paths"
            )
        for col, value in zip(columns, dp, strict=True):
            col.append(value)
    with h5py.File(path, "w", libver=("v110", "v110")) as f:
        for name, col in zip(data_paths, columns, strict=True):
            data = np.asarray(col)
            f.create_dataset(name, data=data, fletcher32=data.size > 0)
    return len(columns[0]) if columns else 0
