"""The wire format: round trips without copies, and strict rejection of malformed messages."""

import msgpack
import numpy as np
import pytest
import zmq

from support.dataflow_cases import malformed_cases
from towerpack.dataflow import RemoteDataZMQ, WireFormatError, decode, encode, recv_datapoint, send_datapoint
from towerpack.dataflow.wire import control
from towerpack.dataflow.wire.codec import decode_message
from towerpack.dataflow.wire.control import Ping, WorkerFailed


def roundtrip(dp, **kw):
    frames = [f if isinstance(f, bytes) else np.asarray(f).tobytes() for f in encode(dp, **kw)]
    return decode(frames, **kw)


def test_roundtrip_of_structures_and_dtypes():
    arrays = [
        np.arange(12, dtype=dt).reshape(3, 4) for dt in ("uint8", "int16", "int64", "float16", "float64")
    ]
    dp = [*arrays, np.array([True, False]), np.zeros((0, 5), "float32"), np.complex64(1 + 2j)]
    out = roundtrip(dp)
    assert isinstance(out, list) and len(out) == len(dp)
    for a, b in zip(dp, out, strict=True):
        np.testing.assert_array_equal(a, b)
        assert np.asarray(a).dtype == b.dtype and np.asarray(a).shape == b.shape
    nested = {"img": np.ones((2, 2), "float32"), "meta": ("name", b"raw", 3, 2.5, None, True), 4: [[1]]}
    assert repr(roundtrip(nested)) == repr(nested)


def test_non_contiguous_and_big_endian_arrays_are_sent_correctly():
    a = np.arange(20, dtype="int32").reshape(4, 5)[:, ::2]
    b = np.arange(4, dtype=">f8")
    out = roundtrip([a, b])
    np.testing.assert_array_equal(out[0], a)
    np.testing.assert_array_equal(out[1], b)
    assert out[1].dtype == np.dtype("<f8")


def test_unsupported_objects_need_explicit_pickle():
    with pytest.raises(WireFormatError, match="pickle"):
        encode([object()])
    with pytest.raises(WireFormatError, match="dtype object"):
        encode([np.array([1, "a"], dtype=object)])
    with pytest.raises(WireFormatError, match="64 bits"):
        encode([2**70])
    frames = encode([{1, 2}], allow_pickle=True)
    with pytest.raises(WireFormatError, match="pickle is not enabled"):
        decode(frames)
    assert decode(frames, allow_pickle=True) == [{1, 2}]


def as_bytes(frames):
    return [bytes(f) if isinstance(f, bytes) else np.asarray(f).tobytes() for f in frames]


def test_large_bytes_values_travel_in_frames_of_their_own():
    rng = np.random.RandomState(0)
    jpegs = [rng.randint(0, 256, 20_000 + i).astype("uint8").tobytes() for i in range(64)]
    dp = [jpegs, np.arange(64), b"short", "label"]
    frames = encode(dp)
    assert len(frames) == 1 + 64 + 1 and len(frames[0]) < 4096
    assert all(f is j for f, j in zip(frames[1:], jpegs, strict=False))  # sent from their own memory
    assert repr(decode(as_bytes(frames))) == repr(dp)


def test_a_batch_of_bytes_crosses_a_socket():
    ctx = zmq.Context()
    push, pull = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    try:
        pull.bind("inproc://wire-bytes-test")
        push.connect("inproc://wire-bytes-test")
        blobs = [bytes([i]) * (5000 + i) for i in range(256)]  # 1.3 MB: over the header limit in all
        send_datapoint(push, [blobs, np.arange(256)])
        got = recv_datapoint(pull)
        assert got[0] == blobs and isinstance(got[0][0], bytes)
    finally:
        push.close(linger=0)
        pull.close(linger=0)
        ctx.term()


@pytest.mark.parametrize(
    ("dp", "message"),
    [
        ([b"x" * 100] * 20_000, "over the wire limit of 1048576 .WireLimits.max_header_bytes"),
        (["s" * 2_000_000], "send long strings as bytes"),
        ([np.zeros(2)] * 1100, "over the wire limit of 1024 frames .WireLimits.max_frames"),
        ([b"x" * 2000] * 1100, "1100 arrays and large bytes values"),
        ([None] * 150_000, "more than 100000 values .WireLimits.max_nodes"),
        ([np.zeros([1] * 40)], "40 dimensions is over the limit of 32"),
    ],
)
def test_encoder_refuses_what_every_receiver_would_reject(dp, message):
    with pytest.raises(WireFormatError, match=message):
        encode(dp)


@pytest.mark.parametrize(
    "frames",
    [
        [msgpack.packb({"v": 1, "k": "dp", "s": ["b", 5]}), b"1234"],
        [msgpack.packb({"v": 1, "k": "dp", "s": ["b", 5]}), b"123456"],
        [msgpack.packb({"v": 1, "k": "dp", "s": ["b", 5]})],
        [msgpack.packb({"v": 1, "k": "dp", "s": ["b", -1]}), b""],
        [msgpack.packb({"v": 1, "k": "dp", "s": ["b", "5"]}), b"12345"],
        [msgpack.packb({"v": 1, "k": "dp", "s": ["b", True]}), b"1"],
        [msgpack.packb({"v": 1, "k": "dp", "s": ["b", 2**40]}), b"1"],
        [msgpack.packb({"v": 1, "k": "dp", "s": ["b"]}), b"1"],
    ],
)
def test_malformed_bytes_frames_are_rejected(frames):
    with pytest.raises(WireFormatError):
        decode(frames)


def test_version_must_be_the_integer_one_not_true():
    for kind, extra in (("dp", {"s": ["v", 1]}), ("ping", {})):
        with pytest.raises(WireFormatError, match="version-1"):
            decode_message([msgpack.packb({"v": True, "k": kind, **extra})])


def test_control_messages_are_distinct_from_datapoints():
    msg = decode_message(control.encode(WorkerFailed(worker=2, pid=77, traceback="boom")))
    assert msg == WorkerFailed(worker=2, pid=77, traceback="boom")
    with pytest.raises(WireFormatError, match="control"):
        decode(control.encode(Ping()))


def test_sockets_send_and_receive_without_copies():
    ctx = zmq.Context()
    push, pull = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    try:
        pull.bind("inproc://wire-test")
        push.connect("inproc://wire-test")
        big = np.random.RandomState(0).randint(0, 255, size=(32, 64, 64, 3)).astype("uint8")
        small = np.arange(3)
        send_datapoint(push, [big, small])
        got = recv_datapoint(pull)
        np.testing.assert_array_equal(got[0], big)
        np.testing.assert_array_equal(got[1], small)
        # The received array is a view of the ZMQ frame, not a copy of it.
        assert not got[0].flags.owndata and got[0].base is not None
        # In one process (inproc) that frame is the sender's memory: the big array left without a copy.
        # Arrays under pyzmq's copy threshold are copied (cheaper than keeping them alive for ZMQ).
        address = lambda a: a.__array_interface__["data"][0]
        assert address(got[0]) == address(big) and address(got[1]) != address(small)
    finally:
        push.close(linger=0)
        pull.close(linger=0)
        ctx.term()


CASES = malformed_cases()


def test_generated_cases_are_numerous_and_varied():
    assert len(CASES) >= 300
    assert len({desc.split(" ")[0] for desc, _ in CASES}) >= 10


@pytest.mark.parametrize("kind", sorted({d.split(" ")[0] for d, _ in CASES}))
def test_every_malformed_message_is_rejected_with_wire_format_error(kind):
    for desc, frames in CASES:
        if desc.split(" ")[0] != kind:
            continue
        with pytest.raises(WireFormatError):
            decode(frames)


def test_empty_message_is_rejected():
    with pytest.raises(WireFormatError, match="empty"):
        decode([])


@pytest.mark.timeout(60)
def test_receiver_skips_malformed_messages_and_keeps_working(tmp_path):
    addr = f"ipc://{tmp_path}/malformed-receiver"
    rx = RemoteDataZMQ(addr, hwm=8, bind=True, timeout=20)
    rx.reset_state()
    ctx = zmq.Context()
    rogue = ctx.socket(zmq.DEALER)
    rogue.setsockopt(zmq.LINGER, 0)
    try:
        rogue.connect(addr)
        sendable = [frames for _, frames in CASES if frames]
        for frames in sendable:
            rogue.send_multipart(frames)
        rogue.send_multipart(
            [
                bytes(f) if isinstance(f, bytes) else np.asarray(f).tobytes()
                for f in encode([np.arange(5), "after"])
            ]
        )
        dp = next(iter(rx))
        np.testing.assert_array_equal(dp[0], np.arange(5))
        assert dp[1] == "after"
        assert rx.malformed == len(sendable)
    finally:
        rogue.close(linger=0)
        ctx.term()
        rx.close()
