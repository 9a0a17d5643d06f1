"""TFRecord files without TensorFlow: the framing, a writer, and TFRecordData (a sharded reader).

A TFRecord file is a sequence of records, each ``u64 length``, ``u32 masked CRC-32C of the
length``, the data, ``u32 masked CRC-32C of the data`` (little-endian), which is what TensorFlow's
``tf.io.TFRecordWriter`` writes and ``tf.data.TFRecordDataset`` reads (uncompressed files).
CRC-32C comes from the ``crc32c`` package (hardware-accelerated). Reading checks both checksums.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import Any, BinaryIO

import crc32c
import numpy as np

from .errors import DatasetFormatError
from .reader import DatasetReader

__all__ = ["TFRecordData", "TFRecordError", "TFRecordWriter", "scan_tfrecord"]

_HEADER = struct.Struct("<QI")
_FOOTER = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8


class TFRecordError(DatasetFormatError):
    """A TFRecord file that is truncated or whose checksums do not match (names the file)."""


def _masked_crc(data: Any) -> int:
    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


class TFRecordWriter:
    """Write records (bytes-like) to a TFRecord file: ``with TFRecordWriter(path) as w: w.write(b)``."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        self._f: BinaryIO = open(self.path, "wb")  # noqa: SIM115 (closed by close())

    def write(self, record: Any) -> None:
        data = memoryview(record).cast("B") if not isinstance(record, bytes) else record
        length = struct.pack("<Q", len(data))
        self._f.write(length + struct.pack("<I", _masked_crc(length)))
        self._f.write(data)
        self._f.write(_FOOTER.pack(_masked_crc(data)))

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> TFRecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def scan_tfrecord(path: str | os.PathLike) -> np.ndarray:
    """Byte offsets of every record of a TFRecord file (reading only the 12-byte headers)."""
    offsets = []
    size = os.path.getsize(path)
    with open(path, "rb", buffering=0) as f:
        pos = 0
        while pos < size:
            header = os.pread(f.fileno(), _HEADER.size, pos)
            if len(header) < _HEADER.size:
                raise TFRecordError(f"{path}: truncated record header at byte {pos}")
            length, crc = _HEADER.unpack(header)
            if _masked_crc(header[:8]) != crc:
                raise TFRecordError(f"{path}: record {len(offsets)} at byte {pos} has a corrupt length")
            offsets.append(pos)
            pos += _HEADER.size + length + _FOOTER.size
            if pos > size:
                raise TFRecordError(f"{path}: record {len(offsets) - 1} is truncated (file ends at {size})")
    return np.array(offsets, dtype=np.int64)


class TFRecordData(DatasetReader):
    """Yield the records of a TFRecord file as ``bytes``, sharded and shuffled as :class:`DatasetReader` says.

    The record offsets are found when the reader is made (a fast scan of the record headers);
    records are read sequentially, run by run, and their checksums checked.
    """

    #: Read records into ``bytearray`` (for decoders that give writable arrays) instead of bytes.
    _writable = False

    def __init__(self, path: str | os.PathLike, shuffle: bool = False, **reader_options: Any) -> None:
        super().__init__(shuffle, **reader_options)
        self.path = os.fspath(path)
        self._offsets = scan_tfrecord(self.path)
        self._file: BinaryIO | None = None

    def _count(self) -> int:
        return len(self._offsets)

    def _open(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = open(self.path, "rb")  # noqa: SIM115 (kept open while reading)

    def _record(self, data: bytes, index: int) -> Any:
        """The datapoint of record number ``index`` (its data, checksum already checked)."""
        return data

    def _read_run(self, start: int, stop: int) -> Iterator[Any]:
        f = self._file
        f.seek(int(self._offsets[start]))
        for i in range(start, stop):
            header = f.read(_HEADER.size)
            if len(header) != _HEADER.size:
                raise TFRecordError(f"{self.path}: record {i} is truncated")
            length, _ = _HEADER.unpack(header)
            if self._writable:
                data = bytearray(length)
                got = f.readinto(data)
            else:
                data = f.read(length)
                got = len(data)
            footer = f.read(_FOOTER.size)
            if got != length or len(footer) != _FOOTER.size:
                raise TFRecordError(f"{self.path}: record {i} is truncated")
            if _masked_crc(data) != _FOOTER.unpack(footer)[0]:
                raise TFRecordError(f"{self.path}: record {i} is corrupt (its checksum does not match)")
            yield self._record(data, i)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_file"] = None  # opened again by reset_state in the process that reads
        return state
