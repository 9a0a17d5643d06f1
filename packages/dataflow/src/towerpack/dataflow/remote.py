"""RemoteDataZMQ: receive datapoints from a prefetch server or ``send_dataflow_zmq`` over ZMQ.

Delivery is credit-based so that many consumers share one producer fairly: a consumer opens a
DEALER socket, grants the producer a window of ``hwm`` datapoints, and acknowledges received
datapoints in small batches, each acknowledgement granting as much new credit. The producer
(a ROUTER) sends only to consumers with credit, so it never queues data for a slow consumer,
and it re-sends the unacknowledged datapoints of a consumer that disconnects to the others.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
import weakref
from collections.abc import Iterator
from typing import Any

import zmq

from .base import DataFlow, DataFlowReentrantGuard, DataFlowTerminated
from .security import apply_client_keys
from .wire import DEFAULT_LIMITS, ControlMessage, WireFormatError, WireLimits, decode_message, encode_control

__all__ = ["RemoteDataZMQ"]

logger = logging.getLogger(__name__)

#: Without data for this long, a consumer re-announces its window (the producer may have restarted).
RESYNC_S = 1.0


def credit_set(window: int) -> list:
    return encode_control("credit", set=window)


def credit_ack(n: int) -> list:
    return encode_control("credit", ack=n)


def _close(sock: zmq.Socket, ctx: zmq.Context) -> None:
    sock.close(linger=0)
    ctx.term()


class RemoteDataZMQ(DataFlow):
    """Datapoints received from a ``dataflow serve`` server or a ``send_dataflow_zmq`` producer, forever.

    Args:
        addr: ZMQ endpoint, e.g. ``tcp://datahost:9100`` or ``ipc://@name``.
        hwm: the credit window: at most this many datapoints are in flight to this consumer.
        bind: bind instead of connect (then producers connect to this consumer).
        curve_server_key: the server's public key (key file or Z85 text) to talk CURVE.
        curve_secret_key: this client's ``.key_secret`` file (must be authorized by the server).
        allow_pickle: accept pickled objects (only from a producer you trust).
        timeout: raise ``TimeoutError`` when no datapoint arrives for this many seconds.

    Call :meth:`reset_state` to open the socket and :meth:`close` to release it. Each datapoint is
    validated; a malformed message is logged and skipped. Received arrays view the ZMQ frames.
    """

    def __init__(
        self,
        addr: str,
        hwm: int = 50,
        bind: bool = False,
        *,
        curve_server_key: Any = None,
        curve_secret_key: Any = None,
        allow_pickle: bool = False,
        timeout: float | None = None,
        limits: WireLimits = DEFAULT_LIMITS,
    ) -> None:
        if hwm < 1:
            raise ValueError(f"RemoteDataZMQ: hwm must be >= 1, got {hwm}")
        self.addr = addr
        self.hwm = int(hwm)
        self.bind = bind
        self.curve_server_key = curve_server_key
        self.curve_secret_key = curve_secret_key
        self.allow_pickle = allow_pickle
        self.timeout = timeout
        self.limits = limits
        self.ack_every = max(1, min(8, self.hwm // 4))
        self.received = 0
        self.malformed = 0
        self._sock: zmq.Socket | None = None
        self._finalizer: weakref.finalize | None = None
        self._guard = DataFlowReentrantGuard()

    def reset_state(self) -> None:
        if self._sock is not None:
            return
        ctx = zmq.Context()
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVHWM, self.hwm + 16)
        sock.setsockopt(zmq.ROUTING_ID, f"c-{os.getpid()}-{uuid.uuid4().hex[:8]}".encode())
        if self.curve_server_key is not None:
            apply_client_keys(sock, self.curve_server_key, self.curve_secret_key)
        if self.bind:
            sock.bind(self.addr)
        else:
            sock.connect(self.addr)
        self._ctx, self._sock = ctx, sock
        self._finalizer = weakref.finalize(self, _close, sock, ctx)
        self._unacked = 0
        self._announce = True

    def _send_control(self, frames: list) -> bool:
        try:
            self._sock.send_multipart(frames, flags=zmq.NOBLOCK)
            return True
        except zmq.Again:  # no producer connected yet (bind mode) or queue full: retry later
            return False

    def _flush_credit(self, partial: bool = False) -> None:
        # Acknowledge first: a window announcement counts what the producer still has in flight.
        due = self._unacked and (partial or self._unacked >= self.ack_every)
        if due and self._send_control(credit_ack(self._unacked)):
            self._unacked = 0
        if self._announce and self._send_control(credit_set(self.hwm)):
            self._announce = False

    def __iter__(self) -> Iterator[Any]:
        if self._sock is None:
            raise RuntimeError("RemoteDataZMQ: call reset_state() before iterating")
        with self._guard:
            while True:
                yield self._next()

    def _next(self) -> Any:
        sock = self._sock
        if sock is None or sock.closed:
            raise DataFlowTerminated("RemoteDataZMQ was closed")
        last = time.monotonic()
        resync_at = last + RESYNC_S
        while True:
            self._flush_credit()
            if not sock.get(zmq.EVENTS) & zmq.POLLIN:
                if not sock.poll(100 if self._announce else int(RESYNC_S * 1000) // 4):
                    self._flush_credit(partial=True)
                    now = time.monotonic()
                    if self.timeout is not None and now - last > self.timeout:
                        raise TimeoutError(
                            f"RemoteDataZMQ: no datapoint from {self.addr} for {self.timeout:g} s"
                        ) from None
                    if now >= resync_at:
                        self._announce = True
                        resync_at = now + RESYNC_S
                continue
            frames = sock.recv_multipart(copy=False)
            try:
                msg = decode_message(frames, self.allow_pickle, self.limits)
            except WireFormatError as e:
                self.malformed += 1
                self._unacked += 1
                logger.warning("RemoteDataZMQ: skipped a malformed message from %s: %s", self.addr, e)
                continue
            if isinstance(msg, ControlMessage):
                if msg.kind != "ping":
                    logger.warning("RemoteDataZMQ: ignored a %r control message", msg.kind)
                continue
            self._unacked += 1
            self.received += 1
            return msg

    def close(self) -> None:
        """Release the socket; iterating afterwards raises ``DataFlowTerminated``."""
        if self._finalizer is not None:
            self._finalizer()
            self._sock = None

    def __enter__(self) -> RemoteDataZMQ:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
