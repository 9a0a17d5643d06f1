"""read_blobproto: caffe's ``BlobProto`` (e.g. ``imagenet_mean.binaryproto``) parsed from its wire format.

The reference compiled caffe.proto with ``protoc`` at run time (and needed ``imp``, gone in
Python 3.12). A BlobProto is a small protobuf message, so it is decoded here directly: fields
``num`` (1), ``channels`` (2), ``height`` (3), ``width`` (4), ``data`` (5, float, packed or not),
``shape`` (7, a BlobShape whose field 1 is the int64 ``dim``s) and ``double_data`` (8). No
protobuf library (and so no TensorFlow) is involved.
"""

from __future__ import annotations

import numpy as np

from .files import DatasetFormatError

__all__ = ["read_blobproto"]

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


def _varint(buf: bytes, pos: int, path: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise DatasetFormatError(f"{path}: truncated protobuf varint at byte {pos}")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise DatasetFormatError(f"{path}: protobuf varint longer than 10 bytes at byte {pos}")


def _fields(buf: bytes, path: str) -> list[tuple[int, int, int | bytes]]:
    """``(field number, wire type, value)`` of every field of a message (bytes for wire types 1, 2, 5)."""
    out: list[tuple[int, int, int | bytes]] = []
    pos = 0
    sizes = {_FIXED64: 8, _FIXED32: 4}
    while pos < len(buf):
        key, pos = _varint(buf, pos, path)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = _varint(buf, pos, path)
            out.append((number, wire, value))
            continue
        if wire == _BYTES:
            size, pos = _varint(buf, pos, path)
        elif wire in sizes:
            size = sizes[wire]
        else:
            raise DatasetFormatError(f"{path}: unsupported protobuf wire type {wire} (field {number})")
        if pos + size > len(buf):
            raise DatasetFormatError(f"{path}: protobuf field {number} runs past the end of the file")
        out.append((number, wire, buf[pos : pos + size]))
        pos += size
    return out


def read_blobproto(path: str) -> np.ndarray:
    """The blob in the binaryproto file ``path`` as float32 of its shape (``(num, c, h, w)`` or ``shape``)."""
    with open(path, "rb") as f:
        buf = f.read()
    dims4 = {1: 1, 2: 0, 3: 0, 4: 0}
    shape: list[int] = []
    parts: list[np.ndarray] = []
    for number, wire, value in _fields(buf, path):
        if number in dims4 and wire == _VARINT:
            dims4[number] = int(value)
        elif number == 5 and wire in (_BYTES, _FIXED32):
            parts.append(np.frombuffer(value, "<f4"))
        elif number == 8 and wire in (_BYTES, _FIXED64):
            parts.append(np.frombuffer(value, "<f8").astype(np.float32))
        elif number == 7 and wire == _BYTES:
            for n, w, v in _fields(value, path):
                if n == 1 and w == _VARINT:
                    shape.append(int(v))
                elif n == 1 and w == _BYTES:
                    pos = 0
                    while pos < len(v):
                        dim, pos = _varint(v, pos, path)
                        shape.append(dim)
    data = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    dims = tuple(shape) if shape else tuple(dims4[i] for i in (1, 2, 3, 4))
    if int(np.prod(dims)) != data.size or data.size == 0:
        raise DatasetFormatError(f"{path}: BlobProto of shape {dims} holds {data.size} values")
    return data.reshape(dims)
