"""ZMQInput reads a real producer process (send_dataflow_zmq) over loopback TCP."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from support.input_driver import InputDriver
from support.procs import free_port, terminate_tree
from towerpack.trainer.compat import tf
from towerpack.trainer.input_source import ZMQInput

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(90)]

SIG = [tf.TensorSpec([None, 2], tf.float32, "x"), tf.TensorSpec([None], tf.int64, "y")]

PRODUCER = """
import sys
import numpy as np
from towerpack.dataflow import DataFromGenerator, send_dataflow_zmq

def gen():
    for k in range(10):
        yield [np.full((3, 2), k, np.float32), np.arange(3, dtype=np.int64) + 10 * k]

send_dataflow_zmq(DataFromGenerator(gen, size=10), sys.argv[1], hwm=8, bind=True)
"""


@pytest.fixture
def producer():
    addr = f"tcp://127.0.0.1:{free_port()}"
    proc = subprocess.Popen([sys.executable, "-c", PRODUCER, addr], stderr=subprocess.PIPE, text=True)
    try:
        yield addr, proc
    finally:
        terminate_tree(proc.pid)
        proc.wait(10)
        proc.stderr.close()


def test_zmq_input_receives_the_stream_in_order(producer):
    addr, proc = producer
    src = ZMQInput(addr, hwm=8)
    d = InputDriver(src, SIG)
    outs, _ = d.build(lambda x, y: (x, y))
    with d:
        d.before_train()
        got = [d.hooked.run(outs[0]) for _ in range(12)]
        thread = src.thread
    # The producer repeats its 10 datapoints; one connected consumer receives them in order.
    assert [int(x[0, 0]) for x, _ in got] == [*range(10), 0, 1]
    assert [y.tolist() for _, y in got[:2]] == [[0, 1, 2], [10, 11, 12]]
    assert got[0][0].dtype.name == "float32" and got[0][0].shape == (3, 2)
    thread.join(5)
    assert not thread.is_alive()
    assert proc.poll() is None  # the producer serves on for other consumers


def test_zmq_input_stops_promptly_without_a_producer():
    addr = f"tcp://127.0.0.1:{free_port()}"
    src = ZMQInput(addr)
    d = InputDriver(src, SIG)
    outs, _ = d.build(lambda x, y: y)
    with d:
        d.before_train()
        # Nothing arrives: a bounded wait shows the run blocks for data rather than failing.
        result = {}
        runner = threading.Thread(target=lambda: result.setdefault("v", _run_catching(d, outs[0])))
        runner.start()
        runner.join(1.0)
        assert runner.is_alive() and not result
        t0 = time.monotonic()
    # after_train closed the queue: the blocked run ended, and the receiving thread stopped.
    runner.join(5)
    assert isinstance(result["v"], tf.errors.OutOfRangeError)
    src.thread.join(5)
    assert not src.thread.is_alive()
    assert time.monotonic() - t0 < 5


def _run_catching(d, fetch):
    try:
        return d.hooked.run(fetch)
    except Exception as e:
        return e


BIG_PRODUCER = """
import sys
import numpy as np
from towerpack.dataflow import DataFromGenerator, send_dataflow_zmq

def gen():
    for k in range(100000):
        yield [np.full((1, 2), k, np.float32), np.array([k], np.int64)]

send_dataflow_zmq(DataFromGenerator(gen, size=100000), sys.argv[1], hwm=4, bind=True)
"""


def test_two_consumers_of_one_producer_get_distinct_datapoints():
    addr = f"tcp://127.0.0.1:{free_port()}"
    proc = subprocess.Popen([sys.executable, "-c", BIG_PRODUCER, addr], stderr=subprocess.PIPE, text=True)
    try:
        drivers = [InputDriver(ZMQInput(addr, hwm=4), SIG) for _ in range(2)]
        outs = [d.build(lambda x, y: y)[0][0] for d in drivers]
        with drivers[0] as a, drivers[1] as b:
            a.before_train()
            b.before_train()
            got = [[int(d.hooked.run(out)[0]) for _ in range(20)] for d, out in ((a, outs[0]), (b, outs[1]))]
    finally:
        terminate_tree(proc.pid)
        proc.wait(10)
        proc.stderr.close()
    assert all(len(set(g)) == 20 for g in got)
    assert not set(got[0]) & set(got[1])  # each datapoint went to exactly one consumer
