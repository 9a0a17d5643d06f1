"""Typed control messages: exact round trips, malformed headers rejected, and datapoints that spell
control words arriving intact through every runner and the data server."""

import pickle
import threading

import msgpack
import numpy as np
import pytest

from support.procs import free_port
from towerpack.dataflow import (
    DataFromList,
    MultiProcessMapAndBatchDataZMQ,
    MultiProcessMapDataZMQ,
    MultiProcessRunnerZMQ,
    MultiThreadRunner,
    RemoteDataZMQ,
    ShardData,
    WireFormatError,
    decode,
    encode,
)
from towerpack.dataflow.serve.server import DataServer
from towerpack.dataflow.wire import control
from towerpack.dataflow.wire.codec import BYTES_FRAME_MIN, ControlMessage, decode_message
from towerpack.dataflow.wire.control import (
    Credit,
    EpochEnd,
    Hello,
    Join,
    Joined,
    Kind,
    NoResult,
    Ping,
    Refused,
    Rejoin,
    Window,
    WorkerFailed,
    WorkerStarted,
)

#: One message of every kind, with fields away from their defaults.
SAMPLES = {
    Kind.WORKER_STARTED: WorkerStarted(length=12),
    Kind.WORKER_FAILED: WorkerFailed(worker=3, pid=4321, traceback="Traceback ...\nValueError: x"),
    Kind.NO_RESULT: NoResult(),
    Kind.EPOCH_END: EpochEnd(epoch=7),
    Kind.CREDIT: Credit(ack=5, window=40),
    Kind.WINDOW: Window(size=40),
    Kind.HELLO: Hello(),
    Kind.PING: Ping(),
    Kind.JOIN: Join(key="00a0", rank=1, world=2, start="", taken=b"\x01" * 16, done=3),
    Kind.JOINED: Joined(generation=9, size=240),
    Kind.REJOIN: Rejoin(),
    Kind.REFUSED: Refused(reason="superseded by a newer job"),
}


def test_samples_cover_every_kind():
    assert set(SAMPLES) == set(Kind)
    assert {type(m).kind for m in SAMPLES.values()} == set(Kind)


@pytest.mark.parametrize("msg", [*SAMPLES.values(), WorkerStarted(None), Credit(), Credit(window=0)])
def test_every_message_round_trips_exactly(msg):
    frames = control.encode(msg)
    assert len(frames) == 1
    header = msgpack.unpackb(frames[0])
    assert header["v"] == 1 and header["k"] == msg.kind.value
    out = decode_message(frames)
    assert out == msg and type(out) is type(msg)
    with pytest.raises(WireFormatError, match="expected a datapoint"):
        decode(frames)


def test_fields_travel_under_their_wire_names():
    assert msgpack.unpackb(control.encode(Credit(ack=2, window=9))[0]) == {
        "v": 1,
        "k": "credit",
        "ack": 2,
        "set": 9,
    }
    # What a consumer of an older version sends is still understood.
    assert decode_message([msgpack.packb({"v": 1, "k": "credit", "set": 8})]) == Credit(ack=0, window=8)
    assert decode_message([msgpack.packb({"v": 1, "k": "credit", "ack": 3})]) == Credit(ack=3)


BIG = 2**64 - 1


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"k": "nonsense"}, "unknown control message kind 'nonsense'"),
        ({"k": ""}, "unknown control message kind ''"),
        ({"k": "PING"}, "unknown control message kind 'PING'"),
        ({"k": "ping", "x": 1}, r"'ping' control message has unknown field\(s\) \['x'\]"),
        ({"k": "none", "tb": "boom"}, r"'none' control message has unknown field\(s\) \['tb'\]"),
        ({"k": "started", "len": 3}, r"unknown field\(s\) \['len'\]"),
        ({"k": "started"}, "'started' control message lacks field 'length'"),
        ({"k": "started", "length": -1}, "'started' control message: field 'length' must be from 0"),
        ({"k": "started", "length": BIG}, "field 'length' must be from 0 to 9223372036854775807, got 1844"),
        ({"k": "started", "length": "3"}, "field 'length' must be int or None, got str"),
        ({"k": "err", "worker": 0, "pid": 9}, "'err' control message lacks field 'traceback'"),
        ({"k": "err", "worker": 0, "pid": 9, "traceback": b"x"}, "field 'traceback' must be str, got bytes"),
        ({"k": "err", "worker": -1, "pid": 9, "traceback": ""}, "field 'worker' must be from 0"),
        ({"k": "err", "worker": 0, "pid": 0, "traceback": ""}, "field 'pid' must be from 1"),
        ({"k": "err", "worker": True, "pid": 9, "traceback": ""}, "field 'worker' must be int, got bool"),
        ({"k": "eoe"}, "'eoe' control message lacks field 'epoch'"),
        ({"k": "eoe", "epoch": 0}, "field 'epoch' must be from 1"),
        ({"k": "eoe", "epoch": 2.0}, "field 'epoch' must be int, got float"),
        ({"k": "eoe", "epoch": None}, "field 'epoch' must be int, got NoneType"),
        ({"k": "eoe", "epoch": BIG}, "field 'epoch' must be from 1"),
        ({"k": "credit", "ack": -1}, "'credit' control message: field 'ack' must be from 0 to 1000, got -1"),
        ({"k": "credit", "ack": 1001}, "field 'ack' must be from 0 to 1000, got 1001"),
        ({"k": "credit", "ack": [1]}, "field 'ack' must be int, got list"),
        ({"k": "credit", "set": BIG}, "field 'set' must be from 0 to 1000"),
        ({"k": "credit", "set": False}, "field 'set' must be int or None, got bool"),
        ({"k": "window"}, "'window' control message lacks field 'size'"),
        ({"k": "window", "size": 1001}, "field 'size' must be from 0 to 1000"),
        ({"k": "window", "size": {"a": 1}}, "field 'size' must be int, got dict"),
    ],
)
def test_malformed_control_headers_raise_wire_format_error_naming_kind_and_field(fields, error):
    with pytest.raises(WireFormatError, match=error):
        decode_message([msgpack.packb({"v": 1, **fields})])
    raw = ControlMessage(fields["k"], {k: v for k, v in fields.items() if k != "k"})
    with pytest.raises(WireFormatError, match=error):
        control.decode(raw)


def test_a_control_message_is_one_frame():
    with pytest.raises(WireFormatError, match="must have one frame"):
        decode_message([*control.encode(Ping()), b"extra"])


def test_this_process_cannot_build_a_malformed_message():
    with pytest.raises(WireFormatError, match="'window' control message: field 'size'"):
        Window(size=-1)
    with pytest.raises(WireFormatError, match="field 'length' must be int or None, got float"):
        WorkerStarted(length=1.5)


def test_a_control_message_never_travels_as_a_pickled_datapoint():
    with pytest.raises(WireFormatError, match="cannot travel as a datapoint"):
        encode([1, EpochEnd(epoch=1)], allow_pickle=True)
    # A peer that pickles one anyway is refused on arrival.
    frames = [msgpack.packb({"v": 1, "k": "dp", "s": ["p"]}), pickle.dumps(EpochEnd(epoch=1))]
    with pytest.raises(WireFormatError, match="cannot travel as a datapoint"):
        decode_message(frames, allow_pickle=True)


# ---------------------------------------------------------------------------------------------
# Datapoints that look like control messages, through every runner


def lookalikes():
    """For every kind: datapoints spelling its word, its header's bytes and its header's map."""
    out = []
    for kind, msg in SAMPLES.items():
        word = kind.value
        header = control.encode(msg)[0]
        fields = msgpack.unpackb(header)
        out += [
            (word, 3),
            [word],
            {"k": word, "v": 1},
            word.encode(),
            word,
            header,
            header + bytes(BYTES_FRAME_MIN),  # travels in a frame of its own
            fields,
            [fields, header],
        ]
    return out


LOOKALIKES = lookalikes()


def same_datapoints(got, expected):
    """The same datapoints, each as often (repr tells tuples from lists and bytes from str)."""
    return sorted(map(repr, got)) == sorted(map(repr, expected))


def identity(dp):
    return dp


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_process_runner_delivers_lookalikes_intact_every_epoch():
    ds = ShardData(DataFromList(LOOKALIKES, shuffle=False))
    with MultiProcessRunnerZMQ(ds, num_proc=2, hwm=4) as df:
        df.reset_state()
        assert df.exact
        for _ in range(2):
            got = list(df)
            assert len(got) == len(LOOKALIKES)
            assert same_datapoints(got, LOOKALIKES)


@pytest.mark.timeout(60)
def test_thread_runner_delivers_lookalikes_intact_every_epoch():
    df = MultiThreadRunner(lambda: ShardData(DataFromList(LOOKALIKES, shuffle=False)), 8, 2)
    try:
        df.reset_state()
        for _ in range(2):
            assert same_datapoints(list(df), LOOKALIKES)
    finally:
        df.close()


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_process_map_delivers_lookalikes_intact_both_ways():
    # strict: a datapoint taken for a "no result" message would raise, one dropped would be missed.
    with MultiProcessMapDataZMQ(
        DataFromList(LOOKALIKES, shuffle=False), 2, identity, buffer_size=16, strict=True
    ) as df:
        df.reset_state()
        for _ in range(2):
            got = list(df)
            assert len(got) == len(LOOKALIKES)
            assert same_datapoints(got, LOOKALIKES)


def lookalike_row(dp):
    """Stackable components spelling the control words (strings need pickle to travel stacked)."""
    kind = list(Kind)[int(dp[0]) % len(Kind)]
    return (kind.value, kind.value.encode(), control.encode(SAMPLES[kind])[0], int(dp[0]))


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_process_map_and_batch_delivers_lookalike_batches_intact():
    n = 3 * len(Kind)
    ds = DataFromList([[np.int64(i)] for i in range(n)], shuffle=False)
    # One mapping worker and batches of one: the stream's order is the input's, repeated forever.
    with MultiProcessMapAndBatchDataZMQ(ds, 1, lookalike_row, batch_size=1, allow_pickle=True) as df:
        df.reset_state()
        it = iter(df)
        for i in list(range(n)) * 2:
            batch = next(it)
            word, raw, header, index = lookalike_row([i])
            assert len(batch) == 4
            assert batch[0].tolist() == [word] and batch[1].tolist() == [raw]
            assert batch[2].tolist() == [header] and batch[3].tolist() == [index]


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
@pytest.mark.parametrize("server_binds", [True, False])
def test_data_server_delivers_lookalikes_intact_to_a_remote_consumer(server_binds):
    addr = f"tcp://127.0.0.1:{free_port()}"
    server = DataServer(
        DataFromList(LOOKALIKES, shuffle=False), addr, bind=server_binds, hwm=8, mark_epochs=True
    )
    n = len(LOOKALIKES)
    errors = []

    def serve():
        try:  # stops once the first datapoint of the second epoch is out
            server.serve(max_datapoints=n + 1, duration=30)
        except Exception as e:
            errors.append(e)

    consumer = RemoteDataZMQ(addr, hwm=8, bind=not server_binds, timeout=20)
    consumer.reset_state()
    thread = threading.Thread(target=serve)
    thread.start()
    try:
        got = list(consumer)  # ends at the server's end-of-epoch mark
        assert consumer.epoch == 1
        assert repr(got) == repr(LOOKALIKES)  # one producer, one consumer: in order
        assert repr(next(iter(consumer))) == repr(LOOKALIKES[0])
        assert consumer.malformed == 0 and consumer.received == n + 1
    finally:
        consumer.close()
        thread.join(40)
    assert not thread.is_alive() and not errors
    assert server.sent == n + 1 and server.malformed == 0
