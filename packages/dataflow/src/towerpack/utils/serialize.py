"""``dumps`` and ``loads``: Python objects to bytes and back, to send over sockets or store.

The format is chosen by ``$TENSORPACK_SERIALIZE`` when each call is made:

- ``msgpack`` (the default): towerpack's record format (:func:`towerpack.dataflow.wire.codec.pack`),
  msgpack for the structure and the raw bytes of numpy arrays, checked by a CRC. It takes what a
  datapoint holds (numpy arrays, numbers, strings, bytes, None, and lists, tuples and dicts of
  them; tuples stay tuples) and nothing is unpickled, so ``loads`` is safe on data from anywhere.
  Arrays come back as read-only views of the buffer (``.copy()`` one to change it).
- ``pickle``: any picklable object; use it only for data from a source you trust.

The reference defaulted to pickle; its ``pyarrow`` format was removed from pyarrow and is refused
with an error.
"""

from __future__ import annotations

import enum
import os
import pickle
from typing import Any

__all__ = ["dumps", "loads"]

#: The environment variable that picks the format.
FORMAT_VAR = "TENSORPACK_SERIALIZE"


class Format(enum.Enum):
    MSGPACK = "msgpack"
    PICKLE = "pickle"


def current_format() -> Format:
    """The format ``$TENSORPACK_SERIALIZE`` asks for (msgpack when unset)."""
    value = os.environ.get(FORMAT_VAR, "").strip().lower() or Format.MSGPACK.value
    if value == "pyarrow":
        raise ValueError(
            f"{FORMAT_VAR}=pyarrow: pyarrow no longer has the serialization API it used; "
            "use msgpack (the default) or pickle"
        )
    try:
        return Format(value)
    except ValueError:
        raise ValueError(f"{FORMAT_VAR}={value!r}: use 'msgpack' or 'pickle'") from None


class MsgpackSerializer:
    """towerpack's record format: data only, never unpickled."""

    @staticmethod
    def dumps(obj: Any) -> bytes:
        from towerpack.dataflow.wire.codec import WireFormatError, pack

        try:
            return pack(obj)
        except WireFormatError as e:
            raise TypeError(
                f"dumps: {e}. To serialize any Python object, set {FORMAT_VAR}=pickle "
                "(and unpickle only data you trust)"
            ) from None

    @staticmethod
    def loads(buf: Any) -> Any:
        from towerpack.dataflow.wire.codec import unpack

        return unpack(buf)


class PickleSerializer:
    """pickle at its highest protocol: any picklable object; unpickling runs code, so trust the source."""

    @staticmethod
    def dumps(obj: Any) -> bytes:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)

    @staticmethod
    def loads(buf: Any) -> Any:
        return pickle.loads(buf)


_SERIALIZERS = {Format.MSGPACK: MsgpackSerializer, Format.PICKLE: PickleSerializer}


def dumps(obj: Any) -> bytes:
    """``obj`` as bytes in the current format."""
    return _SERIALIZERS[current_format()].dumps(obj)


def loads(buf: Any) -> Any:
    """The object ``dumps`` made (in the same format); a damaged or foreign msgpack buffer raises
    ``WireFormatError`` (a ValueError)."""
    return _SERIALIZERS[current_format()].loads(buf)


#: The reference's names for serializing one large object; the same functions here.
dumps_once = dumps
loads_once = loads
