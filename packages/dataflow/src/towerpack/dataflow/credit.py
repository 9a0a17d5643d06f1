"""The credit protocol between producers (:class:`DataServer`) and consumers (:class:`RemoteDataZMQ`).

Producers are ROUTER sockets; consumers are DEALER sockets when they connect and ROUTER sockets
when they bind, so that a binding consumer can answer each of several producers separately.
Control messages, all single-frame wire-format headers:

- consumer to producer: ``credit`` with ``set`` (the window) and/or ``ack`` (datapoints received);
- producer to consumer: ``window`` (the window it granted, at most its own ``hwm``, in reply to
  each ``set``; the consumer acknowledges every quarter of it), ``ping`` (a liveness probe),
  ``eoe`` (an epoch's end), and ``hello`` from a producer that connects to a binding consumer,
  which has to hear from a producer before it can grant it credit.

Both ends also turn on ZMQ heartbeats, so that a peer that hangs or is cut off (its TCP
connection still open) is disconnected and its unacknowledged datapoints go to other consumers.
"""

from __future__ import annotations

import zmq

from .wire import encode_control

__all__ = [
    "BOUND_CONSUMER_ID",
    "HEARTBEAT_S",
    "check_heartbeat",
    "credit_ack",
    "credit_set",
    "credit_window",
    "granted_window",
    "hello",
    "set_heartbeat",
]

#: The routing id of a binding consumer: producers that connect to it address it by this name.
BOUND_CONSUMER_ID = b"towerpack-consumer"
#: A peer that answers no heartbeat for this long is disconnected (seconds).
HEARTBEAT_S = 10.0


def check_heartbeat(timeout_s: float | None) -> None:
    valid = isinstance(timeout_s, (int, float)) and not isinstance(timeout_s, bool) and timeout_s > 0
    if timeout_s is not None and not valid:
        raise ValueError(f"heartbeat must be a positive number of seconds or None, got {timeout_s!r}")


def set_heartbeat(sock: zmq.Socket, timeout_s: float | None) -> None:
    """Ping the peers of ``sock`` and drop any that stays silent for ``timeout_s`` (None: never)."""
    if timeout_s is None:
        return
    timeout_ms = max(int(timeout_s * 1000), 10)
    sock.setsockopt(zmq.HEARTBEAT_IVL, max(timeout_ms // 5, 1))
    sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, timeout_ms)
    sock.setsockopt(zmq.HEARTBEAT_TTL, timeout_ms)  # the peer drops us too if we fall silent


def credit_set(window: int) -> list:
    return encode_control("credit", set=window)


def credit_ack(n: int) -> list:
    return encode_control("credit", ack=n)


def credit_window(size: int) -> list:
    return encode_control("window", size=size)


def granted_window(fields: dict) -> int | None:
    """The window a ``window`` message grants, or None if its fields are not a positive integer."""
    size = fields.get("size")
    return size if type(size) is int and size > 0 else None


def hello() -> list:
    return encode_control("hello")
