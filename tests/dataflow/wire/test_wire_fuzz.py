"""Property-based fuzzing of the wire: every message ends as a valid datapoint or a WireFormatError.

Thousands of generated and mutated messages go through the decoder, the record format, a live
binding RemoteDataZMQ and a live `dataflow serve` (its client-message parser). Examples are
derandomized, so CI runs the same cases every time.
"""

import contextlib
import math
import uuid

import msgpack
import numpy as np
import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from support.dataflow_server import ServerProcess
from support.procs import free_port, wait_for
from towerpack.dataflow import RemoteDataZMQ, WireFormatError, decode, encode, pack, unpack
from towerpack.dataflow.serve.server import parse_credit
from towerpack.dataflow.wire.codec import ALLOWED_DTYPES, decode_message

FUZZ = settings(
    max_examples=1500,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- datapoints --------------------------------------------------------------------------------

arrays = hnp.arrays(
    dtype=st.sampled_from(sorted(ALLOWED_DTYPES)).map(np.dtype),
    shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5),
)
leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=40)
    | st.binary(min_size=1024, max_size=1100)  # travels in a frame of its own
    | arrays
)
datapoints = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5) | st.integers(-5, 5), inner, max_size=3)
    ),
    max_leaves=12,
)


def as_bytes(frames):
    return [bytes(f) if isinstance(f, bytes) else np.ascontiguousarray(f).tobytes() for f in frames]


def same(a, b):
    if isinstance(a, np.ndarray):
        return (
            isinstance(b, np.ndarray)
            and a.dtype.newbyteorder("<") == b.dtype
            and a.shape == b.shape
            and a.tobytes() == np.ascontiguousarray(b).tobytes()
        )
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


@settings(FUZZ, max_examples=600)
@given(datapoints)
def test_every_datapoint_round_trips_through_messages_and_records(dp):
    assert same(dp, decode(as_bytes(encode(dp))))
    assert same(dp, unpack(bytearray(pack(dp))))


# -- mutated and generated messages ------------------------------------------------------------

json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=6)
    | st.binary(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=15,
)
# Structure nodes close to valid ones: the cases validation must get exactly right.
nodes = st.recursive(
    st.tuples(st.sampled_from(["a", "v", "b", "p", "x"]), json_like).map(list)
    | st.tuples(
        st.just("a"),
        st.sampled_from([*sorted(ALLOWED_DTYPES), "|O", "<U3", ">f4", "f4"]),
        st.lists(st.integers(-2, 2**64 - 1) | st.sampled_from([0, 2**31, 2**62, 2**64 - 1]), max_size=5),
    ).map(list),
    lambda inner: (
        st.tuples(st.sampled_from(["l", "t"]), st.lists(inner, max_size=4)).map(list)
        | st.tuples(st.just("d"), st.lists(st.tuples(json_like, inner).map(list), max_size=3)).map(list)
    ),
    max_leaves=10,
)


@st.composite
def messages(draw):
    """A message a hostile or broken peer could send: generated headers, or mutated valid ones."""
    kind = draw(st.sampled_from(["header", "mutated", "random"]))
    frames_data = st.lists(st.binary(max_size=64), max_size=4)
    if kind == "random":
        return draw(st.lists(st.binary(max_size=80), max_size=5))
    if kind == "header":
        header = {
            "v": draw(st.sampled_from([1, 1, True, 2])),
            "k": draw(st.sampled_from(["dp", "dp", "eoe", "x"])),
        }
        header["s"] = draw(nodes | json_like)
        extra = draw(st.dictionaries(st.text(max_size=4), json_like, max_size=2))
        return [msgpack.packb({**extra, **header}, use_bin_type=True), *draw(frames_data)]
    frames = as_bytes(encode(draw(datapoints)))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "cut", "grow", "drop", "add", "swap"]))
        i = draw(st.integers(0, len(frames) - 1))
        f = bytearray(frames[i])
        if op == "flip" and f:
            j = draw(st.integers(0, len(f) - 1))
            f[j] ^= draw(st.integers(1, 255))
        elif op == "cut":
            del f[draw(st.integers(0, len(f))) :]
        elif op == "grow":
            f += draw(st.binary(min_size=1, max_size=16))
        elif op == "drop" and len(frames) > 1:
            del frames[i]
            continue
        elif op == "add":
            frames.insert(i, draw(st.binary(max_size=16)))
            continue
        elif op == "swap" and len(frames) > 1:
            k = draw(st.integers(0, len(frames) - 1))
            frames[i], frames[k] = frames[k], frames[i]
            continue
        frames[i] = bytes(f)
    return frames


def verdict(frames):
    """The decoder's verdict: the decoded message, or the WireFormatError; nothing else may escape."""
    try:
        return decode_message(frames)
    except WireFormatError as e:
        return e


@FUZZ
@given(messages())
def test_any_message_decodes_or_raises_wire_format_error(frames):
    verdict(frames)


@settings(FUZZ, max_examples=600)
@given(datapoints, st.data())
def test_any_corrupted_record_decodes_or_raises_wire_format_error(dp, data):
    record = bytearray(pack(dp))
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "cut", "grow"]))
        if op == "flip" and record:
            record[data.draw(st.integers(0, len(record) - 1))] ^= data.draw(st.integers(1, 255))
        elif op == "cut":
            del record[data.draw(st.integers(0, len(record))) :]
        else:
            record += data.draw(st.binary(min_size=1, max_size=16))
    with contextlib.suppress(WireFormatError):
        unpack(record)


def test_the_shape_that_used_to_break_the_decoder_is_refused():
    header = msgpack.packb({"v": 1, "k": "dp", "s": ["a", "<f4", [0, 2**62]]})
    with pytest.raises(WireFormatError, match="spans"):
        decode([header, b""])


# -- live sockets ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live_receiver(tmp_path_factory):
    addr = f"ipc://{tmp_path_factory.mktemp('fuzz')}/rx"
    rx = RemoteDataZMQ(addr, hwm=8, bind=True, timeout=20)
    rx.reset_state()
    ctx = zmq.Context()
    rogue = ctx.socket(zmq.DEALER)
    rogue.setsockopt(zmq.LINGER, 0)
    rogue.connect(addr)
    yield rx, rogue
    rogue.close(linger=0)
    ctx.term()
    rx.close()


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
@settings(FUZZ, max_examples=800)
@given(messages())
def test_a_live_binding_consumer_survives_every_message_and_agrees_with_the_decoder(live_receiver, frames):
    rx, rogue = live_receiver
    if not frames:
        return  # ZMQ cannot send a message of no frames
    probe = f"probe-{uuid.uuid4().hex}"
    before = rx.malformed
    rogue.send_multipart(frames)
    rogue.send_multipart(as_bytes(encode(["probe", probe])))
    received = []
    while True:
        for dp in rx:  # an iteration may end at an end-of-epoch mark
            if isinstance(dp, list) and dp == ["probe", probe]:
                break
            received.append(dp)
        else:
            continue
        break
    expected = verdict(frames)
    if isinstance(expected, WireFormatError):
        assert rx.malformed == before + 1 and not received
    else:
        assert rx.malformed == before


@pytest.mark.multiprocess
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_live_server_ignores_thousands_of_hostile_client_messages_and_keeps_serving():
    addr = f"tcp://127.0.0.1:{free_port()}"
    sent = []

    with ServerProcess("support.dataflow_factories:counting", "--bind", addr, "--stats", "0.3") as server:
        server.wait_for_line("consumers connected: 0")
        ctx = zmq.Context()
        rogue = ctx.socket(zmq.DEALER)
        rogue.setsockopt(zmq.LINGER, 0)
        rogue.connect(addr)

        @settings(FUZZ, max_examples=2000)
        @given(messages())
        def send(frames):
            if frames:
                rogue.send_multipart(frames)
                sent.append(frames)

        try:
            send()
        finally:
            rogue.close(linger=0)
            ctx.term()
        malformed = 0
        for frames in sent:
            try:
                parse_credit(frames)
            except WireFormatError:
                malformed += 1
        assert malformed > 1500
        wait_for(
            lambda: any(f"{malformed} malformed messages ignored" in line for line in server.lines),
            30,
            what=f"a status line counting {malformed} malformed messages",
        )
        c = RemoteDataZMQ(addr, hwm=4, timeout=20)
        c.reset_state()
        try:
            it = iter(c)
            assert all(next(it)[1].startswith("dp-") for _ in range(20))
        finally:
            c.close()
        assert server.proc.poll() is None
