"""A consumer's acknowledgements: a quarter of the window at a time, at most 16 datapoints, which bounds
what its crash can deliver twice (docs/dataflow.md, "What a consumer crash gives, exactly")."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import zmq

from support.procs import free_port
from towerpack.dataflow import RemoteDataZMQ
from towerpack.dataflow.wire import control
from towerpack.dataflow.wire.codec import decode_message, encode
from towerpack.dataflow.wire.control import Credit, Window

pytestmark = pytest.mark.timeout(60)


def acks_of_a_consumer(window: int, datapoints: int) -> list[int]:
    """The acknowledgements a producer gets while a consumer with ``window`` takes ``datapoints``."""
    addr = f"tcp://127.0.0.1:{free_port()}"
    ctx = zmq.Context()
    producer = ctx.socket(zmq.ROUTER)
    producer.setsockopt(zmq.LINGER, 0)
    producer.bind(addr)
    acks: list[int] = []
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            while sum(acks) < datapoints and producer.poll(2000):
                ident, *frames = producer.recv_multipart()
                msg = decode_message(frames)
                assert isinstance(msg, Credit), msg
                if msg.window is not None and not acks:  # the first announcement: all the data at once
                    producer.send_multipart([ident, *control.encode(Window(msg.window))])
                    for i in range(datapoints + 1):
                        producer.send_multipart([ident, *encode([np.int64(i)])], copy=False)
                if msg.ack:
                    acks.append(msg.ack)
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=produce)
    thread.start()
    consumer = RemoteDataZMQ(addr, hwm=window, timeout=20)
    consumer.reset_state()
    try:
        it = iter(consumer)
        # Taking one more acknowledges the last of them (the consumer's code is done with it).
        assert [int(next(it)[0]) for _ in range(datapoints + 1)] == list(range(datapoints + 1))
        thread.join(20)
    finally:
        consumer.close()
        thread.join(20)
        producer.close()
        ctx.term()
    assert not thread.is_alive() and not errors, errors
    return acks


@pytest.mark.parametrize(("window", "batch"), [(8, 2), (40, 10), (64, 16), (400, 16)])
def test_a_consumer_acknowledges_a_quarter_of_its_window_and_at_most_16_at_a_time(window, batch):
    taken = 3 * batch
    acks = acks_of_a_consumer(window, taken)
    # (A pause of 20 ms in the stream would make the consumer acknowledge what it has so far.)
    assert max(acks) == batch and sum(acks) <= taken, acks
