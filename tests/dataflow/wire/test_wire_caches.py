"""What the wire remembers: a datapoint header is built once per layout, a control message decoded once
per header; neither may change what a message says nor let through what a receiver's limits refuse."""

import math

import numpy as np
import pytest

from towerpack.dataflow import WireFormatError, decode, encode
from towerpack.dataflow.wire import control
from towerpack.dataflow.wire.codec import WireLimits, decode_message
from towerpack.dataflow.wire.control import Credit


def roundtrip(dp):
    return decode([f if isinstance(f, bytes) else np.asarray(f).tobytes() for f in encode(dp)])


def same(a, b) -> bool:
    """``a`` and ``b`` hold the same types, values, dtypes (byte order aside) and shapes (numpy scalars
    travel as arrays of no dimension)."""
    a, b = (np.asarray(x) if isinstance(x, np.generic) else x for x in (a, b))
    if isinstance(a, np.ndarray):
        return (
            type(b) is np.ndarray
            and a.dtype.newbyteorder("<") == b.dtype.newbyteorder("<")
            and a.shape == b.shape
            and np.array_equal(a, b)
        )
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return a == b


def test_datapoints_of_a_layout_seen_before_encode_as_they_did_the_first_time():
    arr = np.arange(6, dtype="float32").reshape(2, 3)
    # The same arrays in the same places: the scalars, containers, dtypes and shapes around them differ.
    variants = [
        [1, arr],
        [True, arr],
        [2, arr],
        ["1", arr],
        [None, arr],
        (1, arr),
        [[1], arr],
        [(1,), arr],
        [0.0, arr],
        [-0.0, arr],
        [1, arr.astype("float64")],
        [1, arr.reshape(3, 2)],
        [1, arr[:, ::2]],
        [1, arr.astype(">f4")],
        [1, np.float32(2.5)],
        [arr, arr, {"k": arr}],  # a layout given up after two arrays
        [arr, b"x" * 2000],
    ]
    for dp in variants * 2:  # the second time from what the first left
        assert same(roundtrip(dp), dp), dp
    first, again = encode([7, arr]), encode([7, arr])
    assert first[0] == again[0] and again[1] is arr  # the header is reused; the array is not copied


def test_a_control_message_decoded_before_is_still_held_to_each_receivers_limits():
    frames = control.encode(Credit(ack=8))
    assert decode_message(frames) == decode_message(frames) == Credit(ack=8)
    with pytest.raises(WireFormatError, match="over the limit"):
        decode_message(frames, limits=WireLimits(max_header_bytes=len(frames[0]) - 1))


def test_a_malformed_control_message_is_refused_every_time():
    bad = [control.encode(Credit(ack=8))[0].replace(b"\x08", b"\xff")]  # ack -1
    for _ in range(2):
        with pytest.raises(WireFormatError, match="'ack' must be from 0"):
            decode_message(bad)
