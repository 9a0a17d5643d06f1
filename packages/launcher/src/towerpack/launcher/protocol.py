"""The control protocol between node launchers: message kinds, framing, authentication, heartbeats.

Node 0's launcher (the coordinator) and each other node's launcher (an agent) share one TCP
connection. Both sides use this module and nothing else to talk.

Frame: a 4-byte big-endian body length, a 32-byte HMAC-SHA256, then the body: a JSON object
``{"kind": <Kind value>, <the message's fields>}``. Every frame after the handshake carries the HMAC
of (direction, sequence number, body) under a key only the two ends know, so a frame from anyone
else, a replayed one or a reordered one is refused and ends the connection.

Handshake (job secret ``S``):

1. agent -> ``Hello(nonce_a)``; coordinator -> ``Challenge(nonce_c)`` (neither authenticated);
2. both derive ``key = HMAC(S, nonces)``; agent -> ``Join(info, ...)``, the first authenticated frame:
   the coordinator checks its HMAC (the agent knows ``S``);
3. coordinator -> ``Welcome(job settings)`` (the coordinator knows ``S``) or ``Reject(refusal, reason)``.

A ``Reject`` says why as a :class:`~towerpack.launcher.errors.Refusal`: only ``BUSY`` (node 0 has too
many joins under way, or has not yet seen this node's earlier connection end) is worth another try;
node 0 may also send it in place of the ``Challenge``. In an elastic job every node listens, and one
that does not coordinate answers ``ELSEWHERE`` with the coordinator's address. How agents retry:
:mod:`towerpack.launcher.joining`.

Then: ``Start``/``Stop``/``Hurry``/``Probe``/``Members``/``Finish`` from the coordinator, ``Exited``/
``Stopped``/``Signalled``/``Probed``/``Agreed`` from the agent, and ``Heartbeat`` both ways every
``interval`` seconds. A peer that sends nothing (heartbeats included) for ``timeout`` seconds is lost.
Live connections are served by :mod:`towerpack.launcher.hub`.

Messages are validated against their dataclass before use: a field of the wrong type, an unknown kind
or an oversized frame is a ``ProtocolError`` (an ``AuthenticationError`` for a frame that fails its
HMAC check); the errors are in :mod:`towerpack.launcher.errors`.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import hmac
import json
import secrets
import select
import socket
import struct
import threading
import time
import types
import typing
from dataclasses import dataclass, fields, is_dataclass

from towerpack.launcher.errors import (
    AuthenticationError,
    Closed,
    HandshakeTimeout,
    ProtocolError,
    Refusal,
    Refused,
)
from towerpack.launcher.plan import NodeInfo
from towerpack.launcher.tasks import Exit, StopRequest, Task
from towerpack.utils.resize_files import SlotState

#: Seconds between heartbeats, and without any frame before a peer is lost (``--heartbeat-timeout``).
HEARTBEAT_INTERVAL_S = 1.0
HEARTBEAT_TIMEOUT_S = 10.0
#: Frame size limits: before authentication (anyone may connect), and after.
MAX_HANDSHAKE_FRAME = 64 << 10
MAX_FRAME = 64 << 20
#: Seconds ``agent_handshake`` waits for each answer by default (a joining node's launcher waits less,
#: then more at each retry: see :mod:`towerpack.launcher.joining` and, for node 0, ``admission``).
HANDSHAKE_TIMEOUT_S = 10.0
#: Seconds a send may wait for a peer that does not read before the connection counts as broken.
SEND_TIMEOUT_S = 2.0

_HEADER = struct.Struct(">I32s")
_NO_MAC = bytes(32)


class Kind(enum.Enum):
    HELLO = "hello"
    CHALLENGE = "challenge"
    JOIN = "join"
    WELCOME = "welcome"
    REJECT = "reject"
    HEARTBEAT = "heartbeat"
    PROBE = "probe"
    PROBED = "probed"
    START = "start"
    STOP = "stop"
    HURRY = "hurry"
    STOPPED = "stopped"
    EXITED = "exited"
    SIGNALLED = "signalled"
    FINISH = "finish"
    MEMBERS = "members"
    AGREED = "agreed"
    RESIZE = "resize"
    RANKS = "ranks"


class Side(enum.Enum):
    COORDINATOR = b"C"
    AGENT = b"A"


@dataclass(frozen=True)
class Hello:
    """Agent: its nonce (opens the handshake)."""

    nonce: str


@dataclass(frozen=True)
class Challenge:
    """Coordinator: its nonce."""

    nonce: str


@dataclass(frozen=True)
class Join:
    """Agent: who it is and the job it was started for (elastic agents: ``nnodes`` 0, MIN:MAX given).
    ``member``: the node id it had in the job whose coordinator it lost (-1: a node new to the job)."""

    info: NodeInfo
    nnodes: int
    n_ps: int
    min_nodes: int = 0
    max_nodes: int = 0
    backend: str = ""
    member: int = -1


@dataclass(frozen=True)
class Welcome:
    """Coordinator: the job's settings, which apply on every node."""

    heartbeat_interval: float
    heartbeat_timeout: float
    grace_period: float


@dataclass(frozen=True)
class Reject:
    """Coordinator: why it refuses this agent, as a kind and in words; ELSEWHERE names the coordinator's
    control address (``addr``, ``port``)."""

    refusal: Refusal
    reason: str
    addr: str = ""
    port: int = 0


@dataclass(frozen=True)
class Heartbeat:
    pass


@dataclass(frozen=True)
class ProbeTarget:
    node: int
    addr: str
    port: int


@dataclass(frozen=True)
class Probe:
    """Coordinator: connect to each of these nodes' probe ports."""

    targets: tuple[ProbeTarget, ...]


@dataclass(frozen=True)
class Probed:
    """Agent: one line per target it could not reach."""

    problems: tuple[str, ...]


@dataclass(frozen=True)
class Start:
    """Coordinator: run these tasks as attempt ``attempt``."""

    attempt: int
    tasks: tuple[Task, ...]


@dataclass(frozen=True)
class Stop:
    """Coordinator: stop this node's processes as ``request`` says; answered by ``Stopped``."""

    request: StopRequest


@dataclass(frozen=True)
class Hurry:
    """Coordinator: skip what is left of the grace period of the stop in progress (SIGKILL now)."""


@dataclass(frozen=True)
class Stopped:
    """Agent: its processes are gone; ``killed`` workers outlived the grace period (SIGKILLed)."""

    killed: int


@dataclass(frozen=True)
class Exited:
    """Agent: a task of an attempt ended (never sent for exits caused by a stop)."""

    exit: Exit


@dataclass(frozen=True)
class Signalled:
    """Agent: its launcher received ``signal`` (and has passed it to its workers)."""

    signal: int


@dataclass(frozen=True)
class Finish:
    """Coordinator: the job is over; exit with ``code``."""

    code: int


@dataclass(frozen=True)
class Member:
    """One node of an elastic job as every node knows it: its id, and where its launcher listens for
    control connections (the coordinator's control port; for the others, the port they would
    coordinate on)."""

    node: int
    host: str
    addr: str
    port: int
    slots: int


@dataclass(frozen=True)
class Members:
    """Coordinator (elastic jobs): the nodes of attempt ``attempt``, the coordinator first; ``you`` is the
    receiver's id, ``next_id`` the first id not given yet. Answered by ``Agreed`` before the attempt
    starts (see :mod:`towerpack.launcher.quorum`)."""

    epoch: int
    attempt: int
    members: tuple[Member, ...]
    you: int
    next_id: int


@dataclass(frozen=True)
class Agreed:
    """Agent: it holds the membership of ``epoch`` (and would take part in a takeover under it)."""

    epoch: int


@dataclass(frozen=True)
class Resize:
    """Coordinator (elastic jobs that resize in place): the ranks of attempt ``attempt`` on this node take
    on the environment of ``tasks`` (slot i: ``tasks[i]``) as generation ``generation`` of the attempt."""

    attempt: int
    generation: int
    tasks: tuple[Task, ...]


@dataclass(frozen=True)
class Ranks:
    """Agent: what the ranks of attempt ``attempt`` on this node last said of resizing in place."""

    attempt: int
    states: tuple[SlotState, ...]


Message = (
    Hello | Challenge | Join | Welcome | Reject | Heartbeat | Probe | Probed | Start | Stop | Hurry
    | Stopped | Exited | Signalled | Finish | Members | Agreed | Resize | Ranks
)  # fmt: skip
_CLASSES: dict[Kind, type] = {
    Kind.HELLO: Hello, Kind.CHALLENGE: Challenge, Kind.JOIN: Join, Kind.WELCOME: Welcome,
    Kind.REJECT: Reject, Kind.HEARTBEAT: Heartbeat, Kind.PROBE: Probe, Kind.PROBED: Probed,
    Kind.START: Start, Kind.STOP: Stop, Kind.HURRY: Hurry, Kind.STOPPED: Stopped, Kind.EXITED: Exited,
    Kind.SIGNALLED: Signalled, Kind.FINISH: Finish, Kind.MEMBERS: Members, Kind.AGREED: Agreed,
    Kind.RESIZE: Resize, Kind.RANKS: Ranks,
}  # fmt: skip
_KINDS = {cls: kind for kind, cls in _CLASSES.items()}


# -- values <-> JSON ---------------------------------------------------------------------------------
def _plain(value):
    if is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _typed(tp, value, where: str):
    """``value`` (decoded JSON) as type ``tp``, or ProtocolError."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _typed(inner, value, where)
    if origin is tuple:
        if not isinstance(value, list):
            raise ProtocolError(f"{where}: expected a list")
        return tuple(_typed(args[0], v, f"{where}[]") for v in value)
    if origin is dict:
        if not isinstance(value, dict):
            raise ProtocolError(f"{where}: expected an object")
        return {_typed(args[0], k, where): _typed(args[1], v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            raise ProtocolError(f"{where}: {value!r} is not a {tp.__name__}") from None
    if is_dataclass(tp):
        if not isinstance(value, dict):
            raise ProtocolError(f"{where}: expected an object")
        hints = typing.get_type_hints(tp)
        names = {f.name for f in fields(tp)}
        if set(value) - names:
            raise ProtocolError(f"{where}: unknown field(s) {sorted(set(value) - names)}")
        try:
            return tp(**{k: _typed(hints[k], v, f"{where}.{k}") for k, v in value.items()})
        except (TypeError, ValueError) as exc:  # a required field is missing, or a value out of range
            raise ProtocolError(f"{where}: {exc}") from None
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
        raise ProtocolError(f"{where}: expected {tp.__name__}, got {type(value).__name__}")
    return value


_HEARTBEAT = Heartbeat()
_HEARTBEAT_BODY = b'{"kind":"heartbeat"}'


def encode(msg: Message) -> bytes:
    if type(msg) is Heartbeat:  # most frames are heartbeats: no JSON work for them
        return _HEARTBEAT_BODY
    return json.dumps({"kind": _KINDS[type(msg)].value, **_plain(msg)}, separators=(",", ":")).encode()


def decode(body: bytes) -> Message:
    if body == _HEARTBEAT_BODY:
        return _HEARTBEAT
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise ProtocolError("a frame is not JSON") from None
    if not isinstance(data, dict):
        raise ProtocolError("a frame is not a JSON object")
    try:
        kind = Kind(data.pop("kind", None))
    except ValueError:
        raise ProtocolError("a frame of unknown kind") from None
    return _typed(_CLASSES[kind], data, kind.value)


# -- framing ---------------------------------------------------------------------------------------
class Connection:
    """Frames over one socket, authenticated once ``authenticate(key)`` was called.

    ``send`` is thread-safe. Reading is for one thread at a time: ``recv`` waits for a message (the
    handshake), or ``fill`` reads what the socket holds and ``take`` returns its complete messages one
    by one (the hub, which reads only sockets that are ready). A send that cannot complete within
    ``SEND_TIMEOUT_S`` (the peer stopped reading) raises OSError, like a closed connection.
    """

    def __init__(self, sock: socket.socket, side: Side):
        sock.settimeout(SEND_TIMEOUT_S)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self.side = side
        peer = sock.getpeername()
        self.peer = peer[0] if isinstance(peer, tuple) else "a local socket"
        self._key: bytes | None = None
        self._sent = 0
        self._received = 0
        self._buf = bytearray()
        self._lock = threading.Lock()

    def authenticate(self, key: bytes) -> None:
        self._key = key

    def _mac(self, direction: bytes, seq: int, body: bytes) -> bytes:
        return hmac.digest(self._key, direction + seq.to_bytes(8, "big") + body, "sha256")

    def send(self, msg: Message, authenticated: bool = True) -> None:
        """Send one message (raises OSError if the connection is gone)."""
        body = encode(msg)
        with self._lock:
            if authenticated and self._key is not None:
                mac = self._mac(self.side.value, self._sent, body)
                self._sent += 1
            else:
                mac = _NO_MAC
            self.sock.sendall(_HEADER.pack(len(body), mac) + body)

    def fill(self) -> None:
        """Read what the socket holds (it must be readable, or this waits); raises Closed."""
        try:
            data = self.sock.recv(1 << 16)
        except (OSError, ValueError):  # closed under us
            raise Closed() from None
        if not data:
            raise Closed()
        self._buf += data

    def take(self, plain_ok: tuple[type, ...] = ()) -> Message | None:
        """The next complete message already read, or None.

        Before ``authenticate`` every frame is accepted; after it, only authenticated ones (and
        unauthenticated messages of the ``plain_ok`` types). Raises ProtocolError.
        """
        if len(self._buf) < _HEADER.size:
            return None
        length, mac = _HEADER.unpack_from(self._buf)
        limit = MAX_FRAME if self._key is not None else MAX_HANDSHAKE_FRAME
        if length > limit:
            raise ProtocolError(f"a frame of {length} bytes (at most {limit})")
        end = _HEADER.size + length
        if len(self._buf) < end:
            return None
        body = bytes(self._buf[_HEADER.size : end])
        del self._buf[:end]
        return self._check(mac, body, plain_ok)

    def recv(self, timeout: float | None, plain_ok: tuple[type, ...] = ()) -> Message | None:
        """The next message, or None after ``timeout`` seconds without a complete frame (see ``take``).
        Raises Closed or ProtocolError."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            msg = self.take(plain_ok)
            if msg is not None:
                return msg
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            poller = select.poll()  # not select.select: a process with many sockets has high descriptors
            try:
                poller.register(self.sock, select.POLLIN)
                ready = poller.poll(None if remaining is None else max(remaining * 1000, 1))
            except (OSError, ValueError):  # closed under us
                raise Closed() from None
            if not ready:
                return None
            self.fill()

    def _check(self, mac: bytes, body: bytes, plain_ok: tuple[type, ...]) -> Message:
        if self._key is None:
            return decode(body)
        peer = Side.AGENT if self.side is Side.COORDINATOR else Side.COORDINATOR
        if hmac.compare_digest(mac, self._mac(peer.value, self._received, body)):
            self._received += 1
            return decode(body)
        if mac == _NO_MAC and plain_ok:
            msg = decode(body)
            if isinstance(msg, plain_ok):
                return msg
        raise AuthenticationError("a frame failed authentication (wrong job secret, or not from the job)")

    def shutdown(self) -> None:
        """End the connection for both ends, keeping the socket's descriptor until ``close``."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.shutdown()
        with contextlib.suppress(OSError):
            self.sock.close()


# -- the handshake -----------------------------------------------------------------------------------
def _session_key(secret: bytes, nonce_agent: str, nonce_coordinator: str) -> bytes:
    data = f"towerpack launch 1|{nonce_agent}|{nonce_coordinator}".encode()
    return hmac.new(secret, data, hashlib.sha256).digest()


def _expect(conn: Connection, cls: type, timeout: float, plain_ok: tuple[type, ...] = ()):
    msg = conn.recv(timeout, plain_ok)
    if msg is None:
        raise HandshakeTimeout(f"no {cls.__name__} message within {timeout:g} s")
    return _expected(msg, cls)


def _expected(msg: Message, cls: type):
    if isinstance(msg, Reject):
        raise Refused(msg.refusal, msg.reason, (msg.addr, msg.port) if msg.addr else None)
    if not isinstance(msg, cls):
        raise ProtocolError(f"expected {cls.__name__}, got {type(msg).__name__}")
    return msg


def agent_handshake(
    conn: Connection, secret: bytes, join: Join, timeout: float = HANDSHAKE_TIMEOUT_S
) -> Welcome:
    """Authenticate to the coordinator and join, waiting up to ``timeout`` s for each answer; raises
    Refused, HandshakeTimeout, ProtocolError or Closed."""
    mine = secrets.token_hex(16)
    conn.send(Hello(mine))
    # Before the Challenge, a Reject can only be "busy" (anyone could send it: it proves nothing).
    theirs = _expect(conn, Challenge, timeout).nonce
    conn.authenticate(_session_key(secret, mine, theirs))
    conn.send(join)
    return _expect(conn, Welcome, timeout, plain_ok=(Reject,))


class CoordinatorHandshake:
    """The coordinator's side of the handshake, fed the agent's messages one at a time as they arrive
    (node 0 serves every joining agent from one thread, so it never waits for one of them)."""

    def __init__(self, conn: Connection, secret: bytes):
        self.conn = conn
        self.secret = secret
        self._nonce: str | None = None

    def on_message(self, msg: Message) -> Join | None:
        """None while the handshake goes on, the agent's Join at its end; ProtocolError (an
        AuthenticationError for a wrong secret) for anything else."""
        if self._nonce is None:
            theirs = _expected(msg, Hello).nonce
            self._nonce = secrets.token_hex(16)
            self.conn.send(Challenge(self._nonce))
            self.conn.authenticate(_session_key(self.secret, theirs, self._nonce))
            return None
        return _expected(msg, Join)


# -- a lost peer -------------------------------------------------------------------------------------
class LossReason(enum.Enum):
    SILENT = "silent"  # no frame, not even a heartbeat, for the timeout
    CLOSED = "closed"  # the connection ended (the peer's process died, or it closed it)
    BROKEN = "broken"  # a frame was malformed or failed authentication


@dataclass(frozen=True)
class Loss:
    """Why a peer is lost, and when it was last heard from (``time.time()``)."""

    reason: LossReason
    detail: str
    last_heard: float

    def describe(self, timeout: float) -> str:
        if self.reason is LossReason.SILENT:
            return f"no heartbeat for {timeout:g} s: its host, launcher or network stopped"
        if self.reason is LossReason.CLOSED:
            return "its launcher's connection closed: the launcher died or its host went away"
        return f"its connection broke: {self.detail}"
