"""The credit protocol between producers (:class:`DataServer`) and consumers (:class:`RemoteDataZMQ`).

Producers are ROUTER sockets; consumers are DEALER sockets when they connect and ROUTER sockets
when they bind, so that a binding consumer can answer each of several producers separately.
The control messages (:mod:`towerpack.dataflow.wire.control`):

- consumer to producer: :class:`Credit` with ``window`` (the window it asks for) and/or ``ack``
  (datapoints received);
- producer to consumer: :class:`Window` (the window it granted, at most its own ``hwm``, in reply
  to each window request; the consumer acknowledges every quarter of it, at most
  ``ACK_BATCH_MAX`` datapoints at a time: :func:`ack_batch`), :class:`Ping` (a liveness probe),
  :class:`EpochEnd`, and :class:`Hello` from a producer that connects to a binding consumer,
  which has to hear from a producer before it can grant it credit.

Both ends also turn on ZMQ heartbeats, so that a peer that hangs or is cut off (its TCP
connection still open) is disconnected and its unacknowledged datapoints go to other consumers.
"""

from __future__ import annotations

import zmq

__all__ = [
    "ACK_BATCH_MAX",
    "BOUND_CONSUMER_ID",
    "HEARTBEAT_S",
    "ack_batch",
    "check_heartbeat",
    "set_heartbeat",
]

#: The routing id of a binding consumer: producers that connect to it address it by this name.
BOUND_CONSUMER_ID = b"towerpack-consumer"
#: A peer that answers no heartbeat for this long is disconnected (seconds).
HEARTBEAT_S = 10.0
#: The most datapoints a consumer acknowledges at once, and so the most that its crash can deliver
#: twice (taken by its code, not acknowledged). Every acknowledgement costs both ends a message and
#: wakes both their threads: batches of 16 rather than 8 cut the CPU the transport takes per 200 KB
#: datapoint by about 5% (benchmarks/dataflow_transport.py, a window of 50).
ACK_BATCH_MAX = 16


def ack_batch(window: int) -> int:
    """How many datapoints a consumer acknowledges at once within ``window``: a quarter of it, so that
    the producer keeps three quarters in flight, and at most ``ACK_BATCH_MAX``."""
    return max(1, min(ACK_BATCH_MAX, window // 4))


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
