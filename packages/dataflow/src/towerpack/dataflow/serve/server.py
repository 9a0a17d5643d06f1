"""DataServer: serve a dataflow to many consumers with credit-based, fair, loss-free delivery.

Each consumer (:class:`RemoteDataZMQ`) announces a window and acknowledges what it receives.
The server round-robins over consumers that have credit, so a slow consumer only slows
itself; it keeps every sent-but-unacknowledged datapoint and gives those to other consumers
when their consumer disconnects, so a dead consumer strands nothing; ZMQ heartbeats disconnect
a consumer that hangs. Messages from clients are validated; anything malformed is logged and
ignored. A server that connects (``bind=False``) says hello to the binding consumer until it
hears from it (see :mod:`towerpack.dataflow.wire.credit`).

With ``mark_epochs`` the server closes every epoch of its dataflow with an :class:`EpochEnd` message to
each consumer, sent once every datapoint of the epoch has been acknowledged (re-sent ones
included), so a consumer's datapoints before the mark all belong to that epoch or earlier.
The server admits at most ``max_consumers`` connections (see
:class:`~towerpack.dataflow.wire.security.Gatekeeper`).

A server made with a ``factory`` also serves jobs that resume exactly: their consumers join it in a
session, which the server's :class:`~towerpack.dataflow.serve.session_host.SessionHost` keeps
(:mod:`towerpack.dataflow.serve.session`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

from ..pipeline.base import DataFlow
from ..pipeline.stream import repeat_forever
from ..wire import control
from ..wire.codec import (
    WireFormatError,
    WireLimits,
    decode_message,
    encode,
    recv_frames,
    send_frames,
    send_part,
)
from ..wire.control import MAX_WINDOW, Credit, EpochEnd, Hello, Join, Ping, Window
from ..wire.credit import BOUND_CONSUMER_ID, HEARTBEAT_S, check_heartbeat, set_heartbeat
from ..wire.release import demote_release_thread
from ..wire.security import ZAP_DOMAIN, Gatekeeper, apply_server_keys, load_authorized
from .session_host import Entry, ServerHooks, SessionHost

__all__ = ["DataServer", "ServerError", "send_dataflow_zmq"]

logger = logging.getLogger(__name__)

#: Consumers are probed this long after a disconnect is seen, and every PROBE_PERIOD_S anyway.
PROBE_DELAYS_S = (0.05, 0.3, 1.5)
PROBE_PERIOD_S = 5.0
#: A server with credit to use sends this many datapoints between two looks at its sockets.
SEND_BUDGET = 32
#: ZMQ send flags as plain ints (combining pyzmq's flag enums costs more than the rest of a send).
_ROUTE = int(zmq.SNDMORE | zmq.NOBLOCK)
_EVENTS, _POLLIN = int(zmq.EVENTS), int(zmq.POLLIN)
#: A server that connects says hello this often until the consumer answers.
HELLO_PERIOD_S = 0.2
#: Connections a server admits by default.
MAX_CONSUMERS = 128
#: A connection that has not finished its ZMQ handshake after this long is closed (ms).
HANDSHAKE_MS = 5000
#: Client messages are small control messages (a credit at most 4 KiB); a join (exact resume) carries
#: the keys a consumer received, up to 16 MiB. Anything bigger closes that connection.
MAX_CLIENT_MESSAGE = 16 << 20
CLIENT_LIMITS = WireLimits(max_frames=0, max_header_bytes=4096, max_depth=2, max_nodes=16)
JOIN_LIMITS = WireLimits(max_frames=0, max_header_bytes=MAX_CLIENT_MESSAGE, max_depth=2, max_nodes=16)


def parse_credit(frames: list) -> Credit:
    """A client's credit message; anything else raises :class:`WireFormatError`."""
    msg = parse_client(frames)
    if not isinstance(msg, Credit):
        raise WireFormatError(f"expected a credit message, got {type(msg).__name__}")
    return msg


def parse_client(frames: list) -> Credit | Join:
    """A client's credit or join message; anything else raises :class:`WireFormatError`."""
    msg = decode_message(frames, limits=JOIN_LIMITS)
    if isinstance(msg, Join):
        return msg
    if not isinstance(msg, Credit):
        raise WireFormatError(f"expected a credit or join message, got {type(msg).__name__}")
    if len(frames[0]) > CLIENT_LIMITS.max_header_bytes:
        raise WireFormatError(f"a credit message of {len(frames[0])} bytes is over the limit")
    return msg


class ServerError(RuntimeError):
    """The server cannot start (address in use, bad keys)."""


@dataclass
class _Peer:
    credit: int = 0
    unacked: deque[Entry] = field(default_factory=deque)  # what it has not acknowledged


@dataclass
class _Rate:
    """Datapoints sent since the last status line, for ``stats_every``."""

    since: float = 0.0
    sent_then: int = 0


class DataServer:
    """Serve ``df`` (repeated forever) on a ROUTER socket to :class:`RemoteDataZMQ` consumers.

    Args:
        df: the dataflow; ``reset_state`` is called by :meth:`serve`. None with ``factory``.
        addr: endpoint to bind (or connect, with ``bind=False``, to a consumer that binds).
        hwm: the most datapoints in flight to one consumer, 1 to ``MAX_WINDOW``; a consumer that
            announces a larger window gets this one. With ``dp_bytes`` per datapoint, the server
            holds at most about ``hwm * consumers * dp_bytes`` of sent, unacknowledged data.
        curve_secret_key: the server's ``.key_secret`` file: enables CURVE encryption.
        curve_authorized: directory of client public keys allowed in (default: any client); it is
            read once, when the server starts.
        allow_pickle: let datapoints that are not arrays/numbers/strings travel pickled.
        report: called with a status line whenever the number of consumers changes.
        heartbeat: disconnect a consumer that answers no ZMQ heartbeat for this many seconds (it
            hangs, or the network dropped it) and give its unacknowledged datapoints to the
            others; None: only when its connection closes.
        mark_epochs: iterate ``df`` epoch by epoch and send every consumer an end-of-epoch mark
            once all of an epoch's datapoints are acknowledged (``RemoteDataZMQ`` then ends
            an iteration there).
        max_consumers: connections admitted at once; more are refused during the ZMQ handshake.
        stats_every: report a status line (datapoints/s, consumers, unacknowledged datapoints)
            every this many seconds; None: never.
        factory: a function that makes the dataflow. With it the server also serves jobs that
            resume exactly (``exact_resume``), making their pipeline anew where they start; without
            ``df``, the dataflow for other consumers is made when the first of them asks.

    The server hands the messages of exact-resume sessions to its ``sessions``
    (:class:`~towerpack.dataflow.serve.session_host.SessionHost`), which acts on the consumers'
    accounts only through the hooks the server gives it.
    """

    def __init__(
        self,
        df: DataFlow | None,
        addr: str,
        bind: bool = True,
        hwm: int = MAX_WINDOW,
        *,
        curve_secret_key: Any = None,
        curve_authorized: Any = None,
        allow_pickle: bool = False,
        report=None,
        heartbeat: float | None = HEARTBEAT_S,
        mark_epochs: bool = False,
        max_consumers: int = MAX_CONSUMERS,
        stats_every: float | None = None,
        factory: Callable[[], DataFlow] | None = None,
    ) -> None:
        if df is None and factory is None:
            raise ValueError("DataServer needs a dataflow (df) or a factory that makes one")
        if curve_authorized is not None and curve_secret_key is None:
            raise ValueError("curve_authorized needs curve_secret_key (the server's own key)")
        if isinstance(hwm, bool) or not isinstance(hwm, int) or not 1 <= hwm <= MAX_WINDOW:
            raise ValueError(f"hwm must be an integer from 1 to {MAX_WINDOW}, got {hwm!r}")
        if isinstance(max_consumers, bool) or not isinstance(max_consumers, int) or max_consumers < 1:
            raise ValueError(f"max_consumers must be a positive integer, got {max_consumers!r}")
        if stats_every is not None and not stats_every > 0:
            raise ValueError(f"stats_every must be a positive number of seconds or None, got {stats_every!r}")
        check_heartbeat(heartbeat)
        self.df = df
        self.factory = factory
        self._source = None
        self._stop = threading.Event()
        self.addr = addr
        self.bind = bind
        self.hwm = hwm
        self.heartbeat = heartbeat
        self.curve_secret_key = curve_secret_key
        self.curve_authorized = curve_authorized
        self.allow_pickle = allow_pickle
        self.report = report or (lambda line: logger.info("%s", line))
        self.mark_epochs = mark_epochs
        self.max_consumers = max_consumers
        self.stats_every = stats_every
        self.peers: dict[bytes, _Peer] = {}
        self.sent = 0
        self.malformed = 0
        self.epochs = 0
        self._order: deque[bytes] = deque()
        self._pending: deque[Entry] = deque()  # to send again
        self._probe_at: list[float] = []
        self._connections: set[int] = set()
        self._epoch_end: EpochEnd | None = None
        self._marks_due: set[bytes] = set()
        self._rate = _Rate()
        self._stalled = False
        hooks = ServerHooks(
            tell=self._tell, forget=self._forget, serve_again=self._pending.extend, restart=self._restart
        )
        self.sessions = SessionHost(factory, hooks, self.report, allow_pickle)

    @property
    def unacked(self) -> int:
        """Datapoints sent to consumers and not yet acknowledged."""
        return sum(len(p.unacked) for p in self.peers.values())

    # -- consumers -------------------------------------------------------------------------

    def _say_count(self) -> None:
        self.report(f"consumers connected: {len(self.peers)}")

    def _drop_peer(self, ident: bytes) -> None:
        peer = self.peers.pop(ident, None)
        if peer is None:
            return
        self._order.remove(ident)
        if self.sessions.active:  # kept until it joins again (in a session all is accounted for)
            self.sessions.orphan(ident, list(peer.unacked))
        else:  # whatever the consumer had not acknowledged goes to the others, oldest first
            self._pending.extendleft(reversed(peer.unacked))
        self._say_count()

    def _forget(self, ident: bytes) -> list[Entry]:
        """Drop the account of consumer ``ident`` (for the session host); what it had not acknowledged."""
        peer = self.peers.pop(ident, None)
        if peer is None:
            return []
        self._order.remove(ident)
        return list(peer.unacked)

    def _restart(self) -> None:
        """A session begins (for the session host): stop serving consumers outside sessions."""
        self._close_untracked()
        for ident in list(self.peers):
            self._forget(ident)
        self._pending.clear()

    def _on_message(self, frames: list) -> None:
        ident = frames[0].bytes
        try:
            credit = parse_client(frames[1:])
        except WireFormatError as e:
            self.malformed += 1
            if self.malformed <= 10 or self.malformed % 100 == 0:
                logger.warning("ignored malformed message #%d from a client: %s", self.malformed, e)
            return
        if isinstance(credit, Join):
            self.sessions.on_join(ident, credit)
            return
        ack, window = credit.ack, credit.window
        if not self.sessions.admits(ident, credit.session):  # a session serves its members only
            if window is not None:
                self.sessions.ask_to_join(ident)
            return
        peer = self.peers.get(ident)
        if peer is None:
            if window is None:  # acknowledgements from a consumer this server never saw
                return
            peer = self.peers[ident] = _Peer()
            self._order.append(ident)
            self._say_count()
            self.sessions.returning(ident)
        for _ in range(min(ack, len(peer.unacked))):
            peer.unacked.popleft()
        if window is not None:
            granted = min(window, self.hwm)
            peer.credit = max(0, granted - len(peer.unacked))
            self._tell(ident, Window(granted))
        else:
            peer.credit = max(0, min(peer.credit + ack, self.hwm - len(peer.unacked)))

    def _read_messages(self) -> None:
        """Handle every message the consumers have sent so far."""
        sock = self.sock
        while sock.get(_EVENTS) & _POLLIN:
            self._on_message(recv_frames(sock))

    def _connection_events(self) -> bool:
        """Track open connections from the socket's events; True if one closed."""
        disconnected = False
        while self.monitor.poll(0, zmq.POLLIN):
            event = recv_monitor_message(self.monitor)
            if event["event"] == zmq.EVENT_ACCEPTED:
                self._connections.add(event["value"])
            else:
                self._connections.discard(event["value"])
                disconnected = True
        return disconnected

    def _admit(self) -> bool:
        """Whether the connection asking to be authenticated may come in (it is counted already)."""
        if self._connection_events():  # its accept event may still be queued
            self._probe_at = [time.monotonic() + d for d in PROBE_DELAYS_S]
        return len(self._connections) <= self.max_consumers

    def _probe(self) -> None:
        ping = control.encode(Ping())
        for ident in list(self.peers):
            try:
                self.sock.send_multipart([ident, *ping], flags=zmq.NOBLOCK)
            except zmq.ZMQError as e:
                if e.errno == zmq.EHOSTUNREACH:
                    self._drop_peer(ident)

    def _say_hello(self) -> None:
        """Connected to a binding consumer that has not granted credit yet: make ourselves known."""
        try:
            self.sock.send_multipart([BOUND_CONSUMER_ID, *control.encode(Hello())], flags=zmq.NOBLOCK)
        except zmq.ZMQError as e:
            if e.errno not in (zmq.EHOSTUNREACH, zmq.EAGAIN):  # not connected yet, or busy
                raise

    # -- sending ---------------------------------------------------------------------------

    def _next_message(self) -> Entry | None:
        """The next datapoint to send and its tag (None outside sessions), or None at an epoch's end
        (until its mark is sent) or while a session waits for its ranks."""
        if self._pending:
            return self._pending.popleft()
        if self.sessions.active:
            return self.sessions.next_message()
        if self._epoch_end is not None:
            return None
        if self._source is None:  # made when the first consumer outside sessions asks
            self.df = self.df if self.df is not None else self.factory()
            self.df.reset_state()
            self._source = repeat_forever(self.df, mark_epochs=self.mark_epochs)
        dp = next(self._source)
        if type(dp) is EpochEnd:
            self._epoch_end = dp
            return None
        return encode(dp, self.allow_pickle), None

    def _close_untracked(self) -> None:
        """Stop the dataflow of consumers outside sessions (a session begins)."""
        close = getattr(self.df, "close", None)
        if self._source is not None and callable(close):
            close()
        self.df = self._source = None
        self._epoch_end = None

    def _tell(self, ident: bytes, msg: control.Message) -> bool:
        """:meth:`_send_control` of a typed message (the session host's way to talk to consumers)."""
        return self._send_control(ident, control.encode(msg))

    def _send_control(self, ident: bytes, frames: list) -> bool:
        """Send a control message to one consumer if its queue has room; whether it was sent."""
        try:
            self.sock.send_multipart([ident, *frames], flags=zmq.NOBLOCK)
        except zmq.ZMQError as e:
            if e.errno not in (zmq.EAGAIN, zmq.EHOSTUNREACH):
                raise
            return e.errno == zmq.EHOSTUNREACH  # a consumer that is gone needs nothing more
        return True

    def _mark_epoch(self) -> None:
        """Once every datapoint of the ending epoch is acknowledged, send each consumer the mark."""
        if self._pending or any(p.unacked for p in self.peers.values()):
            return
        if not self._marks_due:
            self._marks_due = set(self.peers)
        mark = control.encode(self._epoch_end)
        for ident in list(self._marks_due):
            if self._send_control(ident, mark):  # else its queue is full: try again next round
                self._marks_due.discard(ident)
        if not self._marks_due:
            self.epochs = self._epoch_end.epoch
            self._epoch_end = None

    def _next_ready(self, blocked: set[bytes]) -> bytes | None:
        """The next consumer in round-robin order that has credit (moved to the back), or None."""
        order = self._order
        for _ in range(len(order)):
            ident = order[0]
            order.rotate(-1)
            if self.peers[ident].credit > 0 and ident not in blocked:
                return ident
        return None

    def _send_some(self, budget: int) -> int:
        """Send up to ``budget`` datapoints round-robin to consumers with credit; return how many.

        Sets ``_stalled`` when nothing could be sent because every consumer with credit had a
        full ZMQ queue.
        """
        done = 0
        blocked: set[bytes] = set()
        sock = self.sock
        while done < budget:
            ident = self._next_ready(blocked)
            if ident is None:
                break
            entry = self._next_message()
            if entry is None:
                break
            try:
                send_part(sock, ident, _ROUTE, True)
            except zmq.ZMQError as e:
                self._pending.appendleft(entry)
                if e.errno == zmq.EHOSTUNREACH:
                    self._drop_peer(ident)
                elif e.errno == zmq.EAGAIN:
                    blocked.add(ident)
                else:
                    raise
                continue
            # Once the routing frame is accepted, the rest of the message cannot fail.
            send_frames(sock, entry[0])
            peer = self.peers[ident]
            peer.credit -= 1
            peer.unacked.append(entry)
            self.sent += 1
            done += 1
        self._stalled = done == 0 and bool(blocked)
        return done

    # -- main loop -------------------------------------------------------------------------

    def _open(self) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        # Credit bounds what is in flight; ZMQ learns of the peer's reads only about every half
        # HWM, so an SNDHWM near the window would refuse sends that the credit allows.
        self.sock.setsockopt(zmq.SNDHWM, 2 * self.hwm + 16)
        self.sock.setsockopt(zmq.MAXMSGSIZE, MAX_CLIENT_MESSAGE)
        self.sock.setsockopt(zmq.HANDSHAKE_IVL, HANDSHAKE_MS)
        self.sock.setsockopt(zmq.ZAP_DOMAIN, ZAP_DOMAIN)  # so that the gatekeeper sees every connection
        set_heartbeat(self.sock, self.heartbeat)
        authorized = None
        if self.curve_secret_key is not None:
            try:
                apply_server_keys(self.sock, self.curve_secret_key)
                if self.curve_authorized is not None:
                    authorized = load_authorized(self.curve_authorized)
            except (OSError, ValueError) as e:
                raise ServerError(f"CURVE setup failed: {e}") from None
        # Connections are counted from TCP accept (the one being authenticated included) to close.
        self.auth = Gatekeeper(self.ctx, authorized, self._admit)
        self.monitor = self.sock.get_monitor_socket(zmq.EVENT_DISCONNECTED | zmq.EVENT_ACCEPTED)
        try:
            if self.bind:
                self.sock.bind(self.addr)
            else:
                self.sock.connect(self.addr)
        except zmq.ZMQError as e:
            raise ServerError(f"cannot {'bind' if self.bind else 'connect'} {self.addr}: {e}") from None

    def _close(self) -> None:
        if getattr(self, "monitor", None) is not None:
            self.sock.disable_monitor()
            self.monitor.close(linger=0)
        if getattr(self, "sock", None) is not None:
            self.sock.close(linger=0)
        if getattr(self, "auth", None) is not None:
            self.auth.close()
        if getattr(self, "ctx", None) is not None:
            self.ctx.term()
        close = getattr(self.df, "close", None)
        if callable(close):
            close()
        self.sessions.close()

    def serve(self, max_datapoints: int | None = None, duration: float | None = None) -> int:
        """Serve until interrupted (or ``max_datapoints`` sent, or ``duration`` seconds, or :meth:`stop`);
        return the count."""
        if self.df is not None:
            self.df.reset_state()  # before any thread exists: it may fork workers
            self._source = repeat_forever(self.df, mark_epochs=self.mark_epochs)
        self.sock = self.monitor = self.auth = self.ctx = None
        try:
            self._open()
            poller = zmq.Poller()
            poller.register(self.sock, zmq.POLLIN)
            poller.register(self.monitor, zmq.POLLIN)
            poller.register(self.auth.sock, zmq.POLLIN)
            end = None if duration is None else time.monotonic() + duration
            next_probe = time.monotonic() + PROBE_PERIOD_S
            next_hello = 0.0
            release_demoted = False  # pyzmq's release thread, once the first datapoint has started it
            self._rate = _Rate(time.monotonic(), 0)
            self.report(f"serving on {self.addr}" + (" (CURVE)" if self.curve_secret_key is not None else ""))
            self._say_count()
            while (max_datapoints is None or self.sent < max_datapoints) and not self._stop.is_set():
                now = time.monotonic()
                if end is not None and now >= end:
                    break
                # At an epoch's end only re-sent datapoints may go out until the mark is sent; a session
                # sends nothing until its ranks have joined.
                sessions = self.sessions
                more = (sessions.serving if sessions.active else self._epoch_end is None) or self._pending
                can_send = bool(more) and any(p.credit > 0 for p in self.peers.values())
                # A full ZMQ queue cannot be polled for (a ROUTER is always writable): wait a moment.
                events = dict(poller.poll((1 if self._stalled else 0) if can_send else 100))
                if events.get(self.sock):
                    self._read_messages()
                if events.get(self.monitor) and self._connection_events():
                    self._probe_at = [now + d for d in PROBE_DELAYS_S]
                    if not self.bind:
                        # Our one connection broke: the consumer we reconnect to (maybe a new one
                        # under the same name) must get again what was not acknowledged.
                        for ident in list(self.peers):
                            self._drop_peer(ident)
                if events.get(self.auth.sock):
                    self.auth.handle()
                if (self._probe_at and now >= self._probe_at[0]) or now >= next_probe:
                    if self._probe_at and now >= self._probe_at[0]:
                        self._probe_at.pop(0)
                    else:
                        next_probe = now + PROBE_PERIOD_S
                    self._probe()
                if not self.bind and not self.peers and now >= next_hello:
                    self._say_hello()
                    next_hello = now + HELLO_PERIOD_S
                left = SEND_BUDGET if max_datapoints is None else max_datapoints - self.sent
                if self._send_some(min(SEND_BUDGET, left)) and not release_demoted:
                    release_demoted = demote_release_thread()
                if self._epoch_end is not None:
                    self._mark_epoch()
                if self.stats_every is not None and now - self._rate.since >= self.stats_every:
                    self._report_stats(now)
        finally:
            self._close()
        return self.sent

    def stop(self) -> None:
        """Make :meth:`serve` return (from another thread) within about 0.1 s."""
        self._stop.set()

    def _report_stats(self, now: float) -> None:
        rate = (self.sent - self._rate.sent_then) / max(now - self._rate.since, 1e-9)
        self._rate = _Rate(now, self.sent)
        most = max((len(p.unacked) for p in self.peers.values()), default=0)
        epoch = f", {self.epochs} epochs done" if self.mark_epochs else ""
        self.report(
            f"{rate:.1f} datapoints/s, {len(self.peers)} consumers, {self.unacked} unacknowledged "
            f"(at most {most} by one consumer), {self.malformed} malformed messages ignored{epoch}"
        )


def send_dataflow_zmq(df: DataFlow, addr: str, hwm: int = 50, bind: bool = False, **kwargs: Any) -> None:
    """Serve ``df`` forever to :class:`RemoteDataZMQ` consumers (connecting to ``addr`` by default).

    By default it connects to a consumer that binds (``RemoteDataZMQ(addr, bind=True)``), and
    several producers may connect to one such consumer; with ``bind=True`` it binds, for
    consumers that connect. A thin wrapper over :class:`DataServer`; ``kwargs`` go to it (CURVE
    keys, ``allow_pickle``, ``heartbeat``, ``mark_epochs``, ``max_consumers``).
    """
    DataServer(df, addr, bind=bind, hwm=hwm, **kwargs).serve()
