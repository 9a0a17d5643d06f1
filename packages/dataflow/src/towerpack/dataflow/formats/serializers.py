"""Serializers: write one epoch of a dataflow to disk and read it back as a (sharded) dataflow.

The reference's four, with its names and arguments. Datapoints are stored in the wire format's
record layout (:func:`~towerpack.dataflow.wire.codec.pack`), never pickled unless ``allow_pickle=True``
is passed to both ``save`` and ``load``. Every ``load`` returns a
:class:`~towerpack.dataflow.formats.reader.DatasetReader`: it reads sequentially, shuffles with a
buffer, and reads only this process's shard of each epoch (``shard=False`` for all of it); the
keyword options of ``DatasetReader`` can be passed to ``load``.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Sequence
from typing import Any

from ..pipeline.base import DataFlow
from ..pipeline.progress import progress_bar
from ..wire.codec import WireFormatError, pack, unpack
from .errors import DatasetFormatError
from .hdf5 import HDF5Data, write_hdf5
from .lmdb import LMDBRecords, write_lmdb
from .npz import NpzRecords, write_npz
from .tfrecord import TFRecordData, TFRecordWriter

__all__ = [
    "Format",
    "HDF5Serializer",
    "LMDBSerializer",
    "NumpySerializer",
    "TFRecordRecords",
    "TFRecordSerializer",
    "load_dataset",
    "save_dataset",
]


class LMDBSerializer:
    """One LMDB entry per datapoint: the format for large datasets (sequential reads from one file)."""

    @staticmethod
    def save(
        df: DataFlow, path: str | os.PathLike, write_frequency: int = 5000, allow_pickle: bool = False
    ) -> int:
        """Write one epoch of ``df`` to a new database file ``path``; returns the datapoint count."""
        return write_lmdb(df, path, write_frequency, allow_pickle)

    @staticmethod
    def load(
        path: str | os.PathLike, shuffle: bool = True, allow_pickle: bool = False, **options: Any
    ) -> LMDBRecords:
        return LMDBRecords(path, shuffle, allow_pickle=allow_pickle, **options)


class NumpySerializer:
    """All datapoints in one compressed ``.npz`` file, loaded into memory (small datasets)."""

    @staticmethod
    def save(df: DataFlow, path: str | os.PathLike, allow_pickle: bool = False) -> int:
        return write_npz(df, path, allow_pickle)

    @staticmethod
    def load(
        path: str | os.PathLike, shuffle: bool = True, allow_pickle: bool = False, **options: Any
    ) -> NpzRecords:
        return NpzRecords(path, shuffle, allow_pickle=allow_pickle, **options)


class TFRecordRecords(TFRecordData):
    """The datapoints of a TFRecord file written by :class:`TFRecordSerializer` (one record each)."""

    _writable = True

    def __init__(self, path: str | os.PathLike, shuffle: bool = False, allow_pickle: bool = False, **kw: Any):
        super().__init__(path, shuffle, **kw)
        self.allow_pickle = allow_pickle

    def _record(self, data: Any, index: int) -> Any:
        try:
            return unpack(data, self.allow_pickle)
        except WireFormatError as e:
            raise DatasetFormatError(f"{self.path}: record {index} is not a datapoint: {e}") from None


class TFRecordSerializer:
    """One TFRecord record per datapoint; written and read without TensorFlow, readable by it."""

    @staticmethod
    def save(df: DataFlow, path: str | os.PathLike, allow_pickle: bool = False) -> int:

        df.reset_state()
        count = 0
        with TFRecordWriter(path) as w:
            for dp in progress_bar(iterable=df, unit="dp", desc=f"writing {os.fspath(path)}"):
                w.write(pack(dp, allow_pickle))
                count += 1
        return count

    @staticmethod
    def load(
        path: str | os.PathLike,
        size: int | None = None,
        shuffle: bool = False,
        allow_pickle: bool = False,
        **options: Any,
    ) -> TFRecordRecords:
        """Read ``path`` every epoch (the reference read it once); ``size`` is checked if given.

        A TFRecord file cut exactly between records is a valid shorter file: pass ``size`` to
        have that reported.
        """
        df = TFRecordRecords(path, shuffle, allow_pickle=allow_pickle, **options)
        if size is not None and size != df.epoch_size():
            raise DatasetFormatError(
                f"TFRecordSerializer.load: {os.fspath(path)} holds {df.epoch_size()} records, not {size}"
            )
        return df


class HDF5Serializer:
    """One HDF5 dataset per component (arrays of one shape each); readable by any HDF5 tool."""

    @staticmethod
    def save(df: DataFlow, path: str | os.PathLike, data_paths: Sequence[str]) -> int:
        return write_hdf5(df, path, data_paths)

    @staticmethod
    def load(
        path: str | os.PathLike, data_paths: Sequence[str], shuffle: bool = True, **options: Any
    ) -> HDF5Data:
        return HDF5Data(path, data_paths, shuffle, **options)


class Format(enum.Enum):
    """The on-disk formats ``dataflow write`` and ``dataflow inspect`` know."""

    LMDB = "lmdb"
    TFRECORD = "tfrecord"
    NUMPY = "numpy"
    HDF5 = "hdf5"

    @classmethod
    def of(cls, path: str | os.PathLike, given: str | None = None) -> Format:
        """``given``, or the format named by the file's extension (a directory is LMDB)."""
        if given:
            try:
                return cls(str(given).lower())
            except ValueError:
                raise ValueError(
                    f"unknown format {given!r}; use one of {', '.join(f.value for f in cls)}"
                ) from None
        p = os.fspath(path)
        ext = os.path.splitext(p)[1].lower()
        by_ext = {".lmdb": cls.LMDB, ".mdb": cls.LMDB, ".tfrecord": cls.TFRECORD, ".tfrecords": cls.TFRECORD}
        by_ext |= {".npz": cls.NUMPY, ".h5": cls.HDF5, ".hdf5": cls.HDF5}
        if os.path.isdir(p):
            return cls.LMDB
        if ext in by_ext:
            return by_ext[ext]
        raise ValueError(
            f"cannot tell the format of {p} from its extension (.lmdb, .tfrecord, .npz, .h5); "
            "pass --format lmdb|tfrecord|numpy|hdf5"
        )


def save_dataset(
    df: DataFlow, path: str | os.PathLike, fmt: Format, data_paths: Sequence[str] | None = None, **kw: Any
) -> int:
    """Write one epoch of ``df`` in format ``fmt``; returns the datapoint count."""
    if fmt is Format.HDF5:
        if not data_paths:
            raise ValueError(
                "the HDF5 format needs data paths, one per component (e.g. --data-paths image,label)"
            )
        return HDF5Serializer.save(df, path, data_paths)
    saver = {Format.LMDB: LMDBSerializer, Format.TFRECORD: TFRecordSerializer, Format.NUMPY: NumpySerializer}[
        fmt
    ]
    return saver.save(df, path, **kw)


def load_dataset(
    path: str | os.PathLike, fmt: Format, data_paths: Sequence[str] | None = None, **options: Any
) -> DataFlow:
    """Open a dataset written in format ``fmt`` as a reader (keyword options as DatasetReader's)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{os.fspath(path)} does not exist")
    if fmt is Format.HDF5:
        if not data_paths:
            raise ValueError("the HDF5 format needs the data paths to read (e.g. --data-paths image,label)")
        return HDF5Serializer.load(path, data_paths, **options)
    loader = {
        Format.LMDB: LMDBSerializer,
        Format.TFRECORD: TFRecordSerializer,
        Format.NUMPY: NumpySerializer,
    }[fmt]
    return loader.load(path, **options)
