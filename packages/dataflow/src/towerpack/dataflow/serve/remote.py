"""RemoteDataZMQ: receive datapoints from a prefetch server or ``send_dataflow_zmq`` over ZMQ.

Delivery is credit-based so that many consumers share one producer fairly: a consumer grants
the producer a window of ``hwm`` datapoints and acknowledges received datapoints in small
batches, each acknowledgement granting as much new credit. The producer (a ROUTER) sends only to
consumers with credit, so it never queues data for a slow consumer, and it re-sends the
unacknowledged datapoints of a consumer that disconnects to the others. A binding consumer keeps
this account for each producer that connects to it (see :mod:`towerpack.dataflow.wire.credit`).

A server that marks epochs (``dataflow serve --epochs``) ends each iteration of a consumer at
its end-of-epoch mark; without marks an iteration never ends.

A consumer may read several servers at once (a list of addresses; each keeps its own account).
For exact resume a consumer *joins* its servers in a session
(:mod:`towerpack.dataflow.serve.session`): the datapoints then come with the tags of their items.
"""

from __future__ import annotations

import functools
import logging
import os
import time
import uuid
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import zmq

from ..pipeline.base import DataFlow, DataFlowReentrantGuard, DataFlowTerminated
from ..pipeline.sharding import Shard
from ..resume.position import DataPosition
from ..resume.protocol import Step, StepKind
from ..wire import control
from ..wire.allocator import keep_freed_memory
from ..wire.codec import (
    DEFAULT_LIMITS,
    WireFormatError,
    WireLimits,
    decode_message,
    recv_frames,
    set_receive_limit,
)
from ..wire.control import MAX_WINDOW, Credit, EpochEnd, Hello, Joined, Ping, Refused, Rejoin, Window
from ..wire.credit import (
    ACK_BATCH_MAX,
    BOUND_CONSUMER_ID,
    HEARTBEAT_S,
    ack_batch,
    check_heartbeat,
    set_heartbeat,
)
from ..wire.security import apply_client_keys
from .session import ConsumerSession

__all__ = ["RemoteDataZMQ"]

logger = logging.getLogger(__name__)

#: Without data for this long, a consumer re-announces its window (the producer may have restarted).
RESYNC_S = 1.0
#: Among several producers, a window announcement that got no reply this long is sent again (a
#: message sent before its connection was up may be lost).
ANSWER_S = 0.25
#: With nothing to read for this long, acknowledge what was received even if under ack_every.
#: Not shorter: receive timeouts of a few ms cut the throughput of large datapoints by a fifth
#: (benchmarks/dataflow_transport.py), and the producer's ``window`` reply keeps a producer from
#: waiting for these acknowledgements anyway.
PARTIAL_ACK_AFTER_MS = 20
#: Without data for this long, a consumer logs a warning about the likely causes.
SILENCE_WARN_S = 10.0


#: Returned by ``_next`` for an end-of-epoch mark.
_EPOCH_END = object()


@dataclass
class _Producer:
    """What a consumer owes one producer: acknowledgements, and whether to (re-)announce its window."""

    unacked: int = 0
    announce: bool = True
    #: Acknowledge every this many datapoints: a quarter of the window the producer granted.
    ack_every: int = ACK_BATCH_MAX
    #: In a session: a join is to be sent, and the generation whose datapoints are taken (None: none).
    join_due: bool = True
    generation: int | None = None
    #: When it was last heard from (a silent one among others that send is asked again, RESYNC_S),
    #: when this consumer last announced its window to it, and whether it answered.
    heard: float = 0.0
    asked_at: float = 0.0
    answered: bool = False


@functools.lru_cache(maxsize=MAX_WINDOW + 1)
def _ack_frames(count: int) -> list[bytes]:
    """The credit message acknowledging ``count`` datapoints (the same few counts over and over)."""
    return control.encode(Credit(ack=count))


def _server_name(index: int) -> bytes:
    """How a consumer that reads several servers names server ``index`` of its list."""
    return f"s{index}".encode()


#: How the keys of a datapoint served in a session travel.
_KEYS = np.dtype("<i8")


def _session_datapoint(msg: Any) -> tuple[int, np.ndarray, Any]:
    """``(generation, keys, datapoint)`` of a datapoint served in a session. The keys are copied out of
    their frame: they are kept for the session's joins, and a view would keep the frame's objects,
    which Python's garbage collector then walks again and again."""
    if not (type(msg) is list and len(msg) == 3 and type(msg[0]) is int):
        raise WireFormatError("a datapoint served in a session is not [generation, keys, datapoint]")
    keys = msg[1]
    if type(keys) is not np.ndarray or keys.dtype != _KEYS or keys.ndim != 1:
        raise WireFormatError("a datapoint served in a session does not carry its keys as an int64 array")
    return msg[0], keys.copy(), msg[2]


def _close(sock: zmq.Socket, ctx: zmq.Context, monitor: zmq.Socket | None = None) -> None:
    if monitor is not None:
        sock.disable_monitor()
        monitor.close(linger=0)
    sock.close(linger=0)
    ctx.term()


class RemoteDataZMQ(DataFlow):
    """Datapoints received from a ``dataflow serve`` server or a ``send_dataflow_zmq`` producer, forever.

    Args:
        addr: ZMQ endpoint, e.g. ``tcp://datahost:9100`` or ``ipc://@name``; or a list of them, to read
            several servers at once (connecting).
        hwm: the credit window: at most this many datapoints are in flight to this consumer
            (from each producer, when several producers connect to a binding consumer).
        bind: bind instead of connect (then producers connect to this consumer, e.g.
            ``send_dataflow_zmq(df, addr)``; a ``dataflow serve`` server binds, so read it with
            ``bind=False``). One side must bind and the other connect; when nothing arrives for
            ``SILENCE_WARN_S`` seconds a warning says so.
        curve_server_key: the server's public key (key file or Z85 text) to talk CURVE.
        curve_secret_key: this client's ``.key_secret`` file (must be authorized by the server;
            needs ``curve_server_key``).
        allow_pickle: accept pickled objects (only from a producer you trust).
        timeout: raise ``TimeoutError`` when no datapoint arrives for this many seconds.
        heartbeat: disconnect from a producer that answers no ZMQ heartbeat for this many seconds
            (None: never).
        limits: the wire limits of received messages; a frame larger than they allow makes ZMQ
            drop the connection before the frame is stored.

    Call :meth:`reset_state` to open the socket and :meth:`close` to release it. Each datapoint is
    validated; a malformed message is counted in ``malformed``, logged and skipped. Received
    arrays view the ZMQ frames. When the producer marks epochs, an iteration ends at each mark
    and ``epoch`` holds the number of the last epoch that ended.
    """

    def __init__(
        self,
        addr: str | Sequence[str],
        hwm: int = 50,
        bind: bool = False,
        *,
        curve_server_key: Any = None,
        curve_secret_key: Any = None,
        allow_pickle: bool = False,
        timeout: float | None = None,
        limits: WireLimits = DEFAULT_LIMITS,
        heartbeat: float | None = HEARTBEAT_S,
    ) -> None:
        if hwm < 1:
            raise ValueError(f"RemoteDataZMQ: hwm must be >= 1, got {hwm}")
        if curve_secret_key is not None and curve_server_key is None:
            raise ValueError(
                "RemoteDataZMQ: curve_secret_key needs curve_server_key (the server's public key); "
                "without it the connection would not use CURVE at all"
            )
        check_heartbeat(heartbeat)
        self.addrs = [addr] if isinstance(addr, str) else [str(a) for a in addr]
        if not self.addrs or (bind and len(self.addrs) > 1):
            raise ValueError(
                f"RemoteDataZMQ: give one address to bind, or one or more to connect to, got {addr!r}"
            )
        self.addr = ", ".join(self.addrs)
        self.hwm = int(hwm)
        self.bind = bind
        self.curve_server_key = curve_server_key
        self.curve_secret_key = curve_secret_key
        self.allow_pickle = allow_pickle
        self.timeout = timeout
        self.limits = limits
        self.heartbeat = heartbeat
        self.ack_every = ack_batch(self.hwm)
        self.received = 0
        self.malformed = 0
        self.epoch = 0
        self._sock: zmq.Socket | None = None
        self._finalizer: weakref.finalize | None = None
        self._guard = DataFlowReentrantGuard()
        #: Exact resume: this consumer's side of its job's session (None: not in one).
        self._session: ConsumerSession | None = None
        self._tagging = False
        self.position_tag: Any = None

    # -- exact resume (see towerpack.dataflow.serve.session) --------------------------------------

    def resume_step(self) -> Step:
        why = f"{type(self).__name__} (data from `dataflow serve` servers, in the order consumers pull)"
        return Step(StepKind.REMOTE, unordered=why, uncounted=why)

    def start_session(
        self, position: DataPosition | None, rank: int | None = None, world_size: int | None = None
    ) -> None:
        """Join the servers as a rank of a job that starts at ``position`` (None: the beginning);
        before ``reset_state``. Datapoints then carry tags; the job's key comes with
        :meth:`set_session_key`."""
        if self._sock is not None:
            raise RuntimeError("RemoteDataZMQ.start_session() must come before reset_state()")
        here = Shard.current(rank, world_size)  # this process's placement unless given
        self._session = ConsumerSession(position, here.rank, here.world_size)
        self._tagging = True

    def set_session_key(self, key: tuple[int, int]) -> None:
        """The key of the job's session, the same in all its ranks; joining waits for it."""
        self._session.set_key(key)

    def note_done(self, epoch: int) -> None:
        """Every epoch before ``epoch`` has been trained on by the job: joins say so (and carry less)."""
        if self._session is not None:
            self._session.set_done_before(epoch)

    @property
    def dataset_size(self) -> int | None:
        """In a session: the served dataset's size, once a server has said it (else None)."""
        return self._session.size if self._session is not None else None

    def reset_state(self) -> None:
        if self._sock is not None:
            return
        keep_freed_memory()  # received frames are malloc'ed and freed all the time: see its module
        ctx = zmq.Context()
        # A binding consumer may have several producers and must answer each one: a ROUTER with
        # a name they know; so does one that connects to several servers, each under a name of its
        # own. A connecting one with one producer: a DEALER with a fresh name.
        several = len(self.addrs) > 1
        self._routed = self.bind or several
        sock = ctx.socket(zmq.ROUTER if self._routed else zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, self.hwm * len(self.addrs) + 16)
        sock.setsockopt(zmq.RCVTIMEO, PARTIAL_ACK_AFTER_MS)
        set_receive_limit(sock, self.limits)
        if self._routed:
            sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        if self.bind:
            sock.setsockopt(zmq.ROUTING_ID, BOUND_CONSUMER_ID)
        else:
            sock.setsockopt(zmq.ROUTING_ID, f"c-{os.getpid()}-{uuid.uuid4().hex[:8]}".encode())
        # Tells when the server refuses us (key not authorized, or too many connections).
        monitor = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH)
        try:
            set_heartbeat(sock, self.heartbeat)
            if self.curve_server_key is not None:
                apply_client_keys(sock, self.curve_server_key, self.curve_secret_key)
            if self.bind:
                sock.bind(self.addr)
            for i, addr in enumerate([] if self.bind else self.addrs):
                if several:
                    sock.setsockopt(zmq.CONNECT_ROUTING_ID, _server_name(i))
                sock.connect(addr)
        except BaseException:
            _close(sock, ctx, monitor)
            raise
        self._ctx, self._sock, self._monitor = ctx, sock, monitor
        self._finalizer = weakref.finalize(self, _close, sock, ctx, monitor)
        # Producers by routing id; a connecting consumer's one producer is None.
        self._fixed = not self.bind  # the producers are the addresses connected to; none come and go
        if self.bind:
            self._producers: dict[bytes | None, _Producer] = {}
        elif several:
            self._producers = {
                _server_name(i): _Producer(ack_every=self.ack_every) for i in range(len(self.addrs))
            }
        else:
            self._producers = {None: _Producer(ack_every=self.ack_every)}
        self._data_at = time.monotonic()
        self._quiet_check_at = self._data_at + ANSWER_S
        self._warned = False
        self._refused = False
        self._credit_due = False

    def _send_control(self, ident: bytes | None, frames: list) -> bool:
        try:
            if ident is None:
                self._sock.send_multipart(frames, flags=zmq.NOBLOCK)
            else:
                self._sock.send_multipart([ident, *frames], flags=zmq.NOBLOCK)
            return True
        except zmq.Again:  # no producer connected yet, or queue full: retry later
            return False
        except zmq.ZMQError as e:
            if e.errno != zmq.EHOSTUNREACH:
                raise
            if not self._fixed:
                self._producers.pop(ident, None)  # that producer has gone
            return False

    def _flush_credit(self, partial: bool = False) -> None:
        session = self._session
        for ident, p in list(self._producers.items()):
            # In a session, join first: the server takes credit from the consumers of its session only.
            joining = session is not None and p.join_due and session.key is not None
            if joining and self._send_control(ident, control.encode(session.join_message())):
                p.join_due, p.generation = False, None
            # Acknowledge first: a window announcement counts what the producer still has in flight.
            due = p.unacked and (partial or p.unacked >= p.ack_every)
            if due and self._send_control(ident, _ack_frames(p.unacked)):
                p.unacked = 0
            key = session.key if session is not None else None
            if p.announce and self._send_control(ident, control.encode(Credit(window=self.hwm, session=key))):
                p.announce, p.answered, p.asked_at = False, False, time.monotonic()

    def __iter__(self) -> Iterator[Any]:
        if self._sock is None:
            raise RuntimeError("RemoteDataZMQ: call reset_state() before iterating")
        with self._guard:
            while True:
                dp = self._next()
                if dp is _EPOCH_END:
                    return
                yield dp

    def _warn_silence(self) -> None:
        self._warned = True
        if self.bind:
            pairing = (
                "it binds (bind=True), so producers must connect to it: send_dataflow_zmq(df, addr) "
                "connects by default; a `dataflow serve` server binds too, so read one with bind=False"
            )
        else:
            pairing = (
                "it connects (bind=False), so the producer must bind: `dataflow serve --bind ADDR`, "
                "or send_dataflow_zmq(df, addr, bind=True); if producers connect to this consumer, "
                "pass bind=True"
            )
        logger.warning(
            "RemoteDataZMQ: nothing received on %s for %.0f s; %s. Also check the address, the CURVE "
            "keys (a refused client gets only silence) and firewalls.",
            self.addr,
            time.monotonic() - self._data_at,
            pairing,
        )

    def _wait_for_key(self, since: float) -> None:
        """In a session, nothing is joined before the job's key is known (its chief draws it)."""
        while not self._session.wait_key(0.1):
            if self._sock is None or self._sock.closed:
                raise DataFlowTerminated("RemoteDataZMQ was closed")
            if self.timeout is not None and time.monotonic() - since > self.timeout:
                raise TimeoutError(
                    f"RemoteDataZMQ: the job's session key did not come within {self.timeout:g} s"
                )
        self._credit_due = True

    def _wait(self, last: float, resync_at: float) -> float:
        """Nothing queued: wait a little, acknowledging and re-announcing; return the next resync time."""
        # Called after PARTIAL_ACK_AFTER_MS without data (the receive timeout). In a steady stream
        # the next datapoint comes within that moment, and acknowledging each one while waiting
        # for it would double the messages both sides handle. Now the producer may be waiting
        # for credit: an older producer does not say what window it granted.
        self._flush_credit(partial=True)
        waiting = any(p.announce for p in self._producers.values()) or not self._producers
        if self._sock.poll(100 if waiting else int(RESYNC_S * 1000) // 4):
            return resync_at
        self._flush_credit(partial=True)
        if self._monitor.poll(0) and not self._refused:
            self._refused = True
            logger.warning(
                "RemoteDataZMQ: %s refused this client during the handshake: its CURVE key is not "
                "authorized, or the server has its maximum of connections (--max-consumers)",
                self.addr,
            )
        now = time.monotonic()
        if self.timeout is not None and now - last > self.timeout:
            raise TimeoutError(f"RemoteDataZMQ: no datapoint from {self.addr} for {self.timeout:g} s")
        if not self._warned and now - self._data_at > SILENCE_WARN_S:
            self._warn_silence()
        if now >= resync_at:
            for p in self._producers.values():
                p.announce = True
            resync_at = now + RESYNC_S
        return resync_at

    def _next(self) -> Any:
        sock = self._sock
        if sock is None or sock.closed:
            raise DataFlowTerminated("RemoteDataZMQ was closed")
        last = time.monotonic()
        resync_at = last + RESYNC_S
        routed = self._routed
        session = self._session
        if session is not None and session.key is None:
            self._wait_for_key(last)
        if self._credit_due:
            self._credit_due = False
            self._flush_credit()
        while True:
            try:  # waits in ZMQ for up to PARTIAL_ACK_AFTER_MS (RCVTIMEO): no Python polling per message
                frames = recv_frames(sock)
            except zmq.Again:
                resync_at = self._wait(last, resync_at)
                continue
            ident = frames[0].bytes if routed else None
            producer = self._producers.get(ident)
            try:
                msg = decode_message(frames[1:] if routed else frames, self.allow_pickle, self.limits)
            except WireFormatError as e:
                self.malformed += 1
                if producer is not None:
                    producer.unacked += 1  # it used up credit all the same
                logger.warning("RemoteDataZMQ: skipped a malformed message from %s: %s", self.addr, e)
                continue
            if producer is None:  # a producer that connected to this binding consumer
                producer = self._producers[ident] = _Producer(ack_every=self.ack_every)
            producer.heard = now = time.monotonic()
            if len(self._producers) > 1 and now >= self._quiet_check_at:
                self._ask_quiet_producers(now)
            if isinstance(msg, control.Message):
                if self._on_control(msg, producer):
                    self.epoch = msg.epoch
                    return _EPOCH_END
                continue
            producer.unacked += 1
            if session is not None:
                try:
                    generation, tag, msg = _session_datapoint(msg)
                except WireFormatError as e:
                    self.malformed += 1
                    logger.warning("RemoteDataZMQ: skipped a malformed message from %s: %s", self.addr, e)
                    continue
                if generation != producer.generation:  # not taken: served again to whoever
                    continue
                self.position_tag = tag
                session.took(tag)
            # Acknowledged on the next call, once the caller is done with this datapoint.
            self._credit_due = self._credit_due or producer.unacked >= producer.ack_every or producer.announce
            self.received += 1
            self._data_at = now
            self._warned = False
            return msg

    def _on_control(self, msg: control.Message, producer: _Producer) -> bool:
        """Act on a control message from ``producer``; True for an end-of-epoch mark."""
        session = self._session
        match msg:
            case Window(size=size):
                if size:  # a window of 0 (which this consumer never asks for) changes nothing
                    producer.ack_every = min(self.ack_every, ack_batch(size))
                producer.answered = True
            case EpochEnd():
                return True
            case Ping() | Hello():
                pass
            case Joined(generation=generation, size=size) if session is not None:
                # Served from now on: the accounts start again (the server's did too).
                producer.generation, producer.unacked, producer.announce = generation, 0, True
                session.size = size
                self._flush_credit()
            case Rejoin():
                if session is None:
                    raise RuntimeError(
                        f"RemoteDataZMQ: {self.addr} serves a job that resumes exactly (exact_resume): "
                        "its consumers must join it (ZMQInput under TrainConfig(exact_resume=True))"
                    )
                producer.join_due, producer.generation = True, None
                self._flush_credit()
            case Refused(reason=reason):
                raise RuntimeError(f"RemoteDataZMQ: {self.addr} refused this consumer: {reason}")
            case _:
                logger.warning("RemoteDataZMQ: ignored a %r control message", msg.kind.value)
        return False

    def _ask_quiet_producers(self, now: float) -> None:
        """Among several producers, one that did not answer this consumer's window within ANSWER_S, or
        has sent nothing for RESYNC_S (it may have restarted while the others kept sending), gets the
        window again."""
        self._quiet_check_at = now + ANSWER_S
        for p in self._producers.values():
            if (not p.answered and now - p.asked_at > ANSWER_S) or now - p.heard > RESYNC_S:
                p.announce = True
                self._credit_due = True

    def close(self) -> None:
        """Release the socket; iterating afterwards raises ``DataFlowTerminated``."""
        if self._finalizer is not None:
            self._finalizer()
            self._sock = None

    def __enter__(self) -> RemoteDataZMQ:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
