"""A consumer in an exact-resume session checks what a server sends it: a datapoint that does not carry
its generation and its keys as an int64 array is skipped as malformed; the keys it takes are its own."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import zmq

from support.procs import free_port
from towerpack.dataflow import RemoteDataZMQ
from towerpack.dataflow.serve.server import JOIN_LIMITS
from towerpack.dataflow.wire import control
from towerpack.dataflow.wire.codec import decode_message, encode, recv_frames
from towerpack.dataflow.wire.control import Join, Joined

pytestmark = pytest.mark.timeout(60)

GENERATION = 7
X = np.arange(12, dtype="float32").reshape(3, 4)
#: What a hostile (or broken) server might send in a session, each followed by nothing else.
MALFORMED = [
    [GENERATION, "5", [X]],  # keys as text
    [GENERATION, np.array([5.0]), [X]],  # keys as floats
    [GENERATION, np.zeros((1, 1), np.int64), [X]],  # keys in two dimensions
    [GENERATION, np.array([5], np.int32), [X]],  # keys of another width
    [GENERATION, [X]],  # no keys at all
    [True, np.array([5], np.int64), [X]],  # a generation that is not an integer
]
GOOD = [GENERATION, np.array([5 << 40 | 3], np.int64), [X]]


def serve_once(sock: zmq.Socket, stop: threading.Event) -> None:
    """Answer the consumer's join, then send it the malformed datapoints and one good one."""
    while not stop.is_set():
        if not sock.poll(100):
            continue
        frames = recv_frames(sock)
        ident = frames[0].bytes
        if isinstance(decode_message(frames[1:], limits=JOIN_LIMITS), Join):
            sock.send_multipart([ident, *control.encode(Joined(GENERATION, 100))])
            for dp in [*MALFORMED, GOOD]:
                sock.send_multipart([ident, *encode(dp)], copy=False)
            return


def test_malformed_session_datapoints_are_skipped_and_the_keys_taken_are_copied_out_of_the_message():
    addr = f"tcp://127.0.0.1:{free_port()}"
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind(addr)
    stop = threading.Event()
    server = threading.Thread(target=serve_once, args=(sock, stop), daemon=True)
    server.start()
    c = RemoteDataZMQ(addr, hwm=8, timeout=20)
    try:
        c.start_session(None, rank=0, world_size=1)
        c.set_session_key((1, 2))
        c.reset_state()
        dp = next(iter(c))
        np.testing.assert_array_equal(dp[0], X)
        assert c.malformed == len(MALFORMED)
        assert c.position_tag.tolist() == [5 << 40 | 3]
        # A session keeps every key it took: they own their memory rather than hold on to the message.
        assert c.position_tag.flags.owndata
    finally:
        c.close()
        stop.set()
        server.join(10)
        sock.close(linger=0)
        ctx.term()
