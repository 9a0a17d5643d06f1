"""Control messages between dataflow processes: their kinds, typed fields, and wire encoding.

Workers tell their runner that they started, failed, ended an epoch or mapped to nothing; data
servers and remote consumers exchange credit, pings and epoch marks, and the session messages of
exact resume (:mod:`towerpack.dataflow.serve.session`). Each message is a frozen
dataclass and travels as one wire-format header frame ``{"v": 1, "k": <Kind value>, <fields>}``
(see :mod:`towerpack.dataflow.wire.codec`) that no datapoint can be mistaken for: a datapoint's header
has kind ``"dp"``, which is no :class:`Kind`. :func:`decode` checks the kind and every field (type,
range, no unknown or missing field) and raises ``WireFormatError`` naming the kind and the field, so
a receiver only ever sees well-formed messages.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any, ClassVar

import msgpack

from .header import VERSION, ControlMessage, WireFormatError

__all__ = [
    "MAX_WINDOW",
    "Credit",
    "EpochEnd",
    "Hello",
    "Join",
    "Joined",
    "Kind",
    "Message",
    "NoResult",
    "Ping",
    "Refused",
    "Rejoin",
    "Window",
    "WorkerFailed",
    "WorkerStarted",
    "decode",
    "encode",
]

#: Largest credit window a consumer may ask for, or a producer grant.
MAX_WINDOW = 1000
_MAX_INT = 2**63 - 1


class Kind(enum.Enum):
    """The kinds of control message; the value is the header's ``"k"``."""

    WORKER_STARTED = "started"
    WORKER_FAILED = "err"
    NO_RESULT = "none"
    EPOCH_END = "eoe"
    CREDIT = "credit"
    WINDOW = "window"
    HELLO = "hello"
    PING = "ping"
    JOIN = "join"
    JOINED = "joined"
    REJOIN = "rejoin"
    REFUSED = "refused"


@dataclass(frozen=True)
class _Spec:
    """How one field travels: its key in the header and the values it may take."""

    key: str
    value_type: type
    low: int = 0
    high: int = _MAX_INT
    optional: bool = False  # None is allowed
    sparse: bool = False  # None is left out of the header (a field newer than the message)

    def check(self, kind: Kind, value: Any) -> None:
        if value is None and self.optional:
            return
        if type(value) is not self.value_type:  # exact: a bool is not an int here
            expected = self.value_type.__name__ + (" or None" if self.optional else "")
            raise WireFormatError(
                f"{kind.value!r} control message: field {self.key!r} must be {expected}, "
                f"got {type(value).__name__}"
            )
        if self.value_type is int and not self.low <= value <= self.high:
            raise WireFormatError(
                f"{kind.value!r} control message: field {self.key!r} must be from {self.low} to "
                f"{self.high}, got {value}"
            )


def _int(key: str, low: int = 0, high: int = _MAX_INT, optional: bool = False, **kw: Any) -> Any:
    return dataclasses.field(metadata={"spec": _Spec(key, int, low, high, optional)}, **kw)


def _text(key: str, optional: bool = False, sparse: bool = False, **kw: Any) -> Any:
    return dataclasses.field(metadata={"spec": _Spec(key, str, optional=optional, sparse=sparse)}, **kw)


def _bytes(key: str) -> Any:
    return dataclasses.field(metadata={"spec": _Spec(key, bytes)})


_CLASSES: dict[Kind, type[Message]] = {}


class Message:
    """Base of the control messages; a subclass names its kind: ``class Ping(Message, kind=Kind.PING)``.

    Fields are checked on construction, so this process can no more build a malformed message
    than decode one.
    """

    kind: ClassVar[Kind]

    def __init_subclass__(cls, kind: Kind, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls.kind = kind
        _CLASSES[kind] = cls

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            f.metadata["spec"].check(self.kind, getattr(self, f.name))


@dataclass(frozen=True)
class WorkerStarted(Message, kind=Kind.WORKER_STARTED):
    """A runner's worker is up: the length of its part of the input (None: unknown)."""

    length: int | None = _int("length", optional=True)


@dataclass(frozen=True)
class WorkerFailed(Message, kind=Kind.WORKER_FAILED):
    """A worker raised: its index, pid and traceback text (no pickle crosses the socket)."""

    worker: int = _int("worker")
    pid: int = _int("pid", low=1)
    traceback: str = _text("traceback")


@dataclass(frozen=True)
class NoResult(Message, kind=Kind.NO_RESULT):
    """A map worker's function returned None for a datapoint."""


@dataclass(frozen=True)
class EpochEnd(Message, kind=Kind.EPOCH_END):
    """Pass number ``epoch`` (from 1) is over: yielded by ``repeat_forever(ds, mark_epochs=True)``
    and sent by workers and data servers."""

    epoch: int = _int("epoch", low=1)


@dataclass(frozen=True)
class Credit(Message, kind=Kind.CREDIT):
    """Consumer to producer: ``ack`` datapoints received, and/or the ``window`` it asks for (with the
    key of its exact-resume ``session``, if it is in one)."""

    ack: int = _int("ack", high=MAX_WINDOW, default=0)
    window: int | None = _int("set", high=MAX_WINDOW, optional=True, default=None)
    session: str | None = _text("sess", optional=True, sparse=True, default=None)


@dataclass(frozen=True)
class Window(Message, kind=Kind.WINDOW):
    """Producer to consumer: the window it granted in reply to a consumer's ``Credit(window=...)``."""

    size: int = _int("size", high=MAX_WINDOW)


@dataclass(frozen=True)
class Hello(Message, kind=Kind.HELLO):
    """A producer that connected to a binding consumer makes itself known (to be granted credit)."""


@dataclass(frozen=True)
class Ping(Message, kind=Kind.PING):
    """A producer checks that a consumer is still there (a failed send drops it)."""


@dataclass(frozen=True)
class Join(Message, kind=Kind.JOIN):
    """Consumer to server, exact resume: rank ``rank`` of ``world`` of the job started as ``key`` starts
    at ``start`` (a DataPosition's JSON, "" for the beginning) and has received the items ``taken``
    (int64 ``(start, stop)`` key ranges, little-endian) in this session, of epochs ``done`` and later."""

    key: str = _text("key")
    rank: int = _int("rank")
    world: int = _int("world", low=1)
    start: str = _text("start")
    taken: bytes = _bytes("taken")
    done: int = _int("done", low=1, default=1)  # every epoch before it is trained on


@dataclass(frozen=True)
class Joined(Message, kind=Kind.JOINED):
    """Server to consumer: the session is served from now on, by the pipeline of ``generation`` (every
    datapoint says its generation), of a dataset of ``size`` items."""

    generation: int = _int("generation", low=1)
    size: int = _int("size")


@dataclass(frozen=True)
class Rejoin(Message, kind=Kind.REJOIN):
    """Server to consumer: this server does not know the consumer in its session (it restarted): join."""


@dataclass(frozen=True)
class Refused(Message, kind=Kind.REFUSED):
    """Server to consumer: the server will not serve it, and why."""

    reason: str = _text("reason")


def encode(msg: Message) -> list[bytes]:
    """The frames of ``msg``: one wire-format header."""
    header = {"v": VERSION, "k": msg.kind.value}
    for f in dataclasses.fields(msg):
        spec, value = f.metadata["spec"], getattr(msg, f.name)
        if value is not None or not spec.sparse:
            header[spec.key] = value
    return [msgpack.packb(header, use_bin_type=True)]


def decode(raw: ControlMessage) -> Message:
    """The typed message of a received control header; ``WireFormatError`` if anything is wrong."""
    try:
        kind = Kind(raw.kind)
    except ValueError:
        raise WireFormatError(f"unknown control message kind {raw.kind[:40]!r}") from None
    cls = _CLASSES[kind]
    names = {f.metadata["spec"].key: f.name for f in dataclasses.fields(cls)}
    unknown = [k[:40] for k in raw.fields if k not in names]
    if unknown:
        raise WireFormatError(f"{kind.value!r} control message has unknown field(s) {unknown[:4]!r}")
    values = {names[k]: v for k, v in raw.fields.items()}
    for f in dataclasses.fields(cls):
        if f.name not in values and f.default is dataclasses.MISSING:
            raise WireFormatError(f"{kind.value!r} control message lacks field {f.metadata['spec'].key!r}")
    return cls(**values)
