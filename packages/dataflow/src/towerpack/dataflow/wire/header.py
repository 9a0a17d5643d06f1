"""What every wire message starts with: the format version, the header of a control message as
received, and the one error a malformed message gives. Both :mod:`.wire` and :mod:`.control` build
on it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["VERSION", "ControlMessage", "WireFormatError"]

#: The wire format's version, the header's ``"v"``.
VERSION = 1


class WireFormatError(ValueError):
    """A message that does not follow the wire format (or cannot be encoded in it)."""


@dataclass(frozen=True)
class ControlMessage:
    """The header of a control message as received, before :func:`towerpack.dataflow.wire.control.decode`
    checks and types it: ``kind`` plus the header's other fields."""

    kind: str
    fields: dict
