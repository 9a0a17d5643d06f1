"""The wire format: round trips without copies, and strict rejection of malformed messages."""

import numpy as np
import pytest
import zmq

from support.dataflow_cases import malformed_cases
from towerpack.dataflow import RemoteDataZMQ, WireFormatError, decode, encode, recv_datapoint, send_datapoint
from towerpack.dataflow.wire import ControlMessage, decode_message, encode_control


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


def test_control_messages_are_distinct_from_datapoints():
    msg = decode_message(encode_control("err", tb="boom"))
    assert msg == ControlMessage("err", {"tb": "boom"})
    with pytest.raises(WireFormatError, match="control"):
        decode(encode_control("ping"))


def test_sockets_send_and_receive_without_copies():
    ctx = zmq.Context()
    push, pull = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    try:
        pull.bind("inproc://wire-test")
        push.connect("inproc://wire-test")
        big = np.random.RandomState(0).randint(0, 255, size=(32, 64, 64, 3)).astype("uint8")
        send_datapoint(push, [big, np.arange(3)])
        got = recv_datapoint(pull)
        np.testing.assert_array_equal(got[0], big)
        # The received array is a view of the ZMQ frame, not a copy of it.
        assert not got[0].flags.owndata and got[0].base is not None
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
def test_receiver_skips_malformed_messages_and_keeps_working():
    addr = "ipc://@towerpack-test-malformed-receiver"
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
