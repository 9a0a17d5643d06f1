"""The wire format: one msgpack header frame plus one frame per array, validated before use.

A message is ``[header, frame_0, frame_1, ...]``. The header is a msgpack map
``{"v": 1, "k": kind, ...}``. For a datapoint (kind ``"dp"``) it holds ``"s"``, a tree that
describes the datapoint's structure; arrays appear in the tree as ``["a", dtype, shape]`` and
bytes values of at least ``BYTES_FRAME_MIN`` bytes as ``["b", length]``; each of these consumes
the next frame in order. Other kinds are control messages (worker errors, pings, credits) that
carry only a header; :mod:`towerpack.dataflow.wire.control` defines them, and :func:`decode_message`
returns them typed.

Receiving never copies array data: arrays are ``np.frombuffer`` views of the received
frames. Every header is checked (allowed dtypes, ``prod(shape) * itemsize`` equal to the frame
length, bounded counts, sizes and nesting) before any frame is touched; any violation raises
:class:`WireFormatError`, and so does anything else wrong with a message: decoding a peer's
message gives a valid datapoint or that one exception, never another. The encoder enforces the
same limits, so that it never produces a message that receivers reject. Pickle is used only
where both sides pass ``allow_pickle=True``. A stream repeats itself, so the work is done once:
headers are built once per layout of a datapoint, and validated once per header (datapoint plans
and control messages are kept by their header bytes).

Files store a datapoint as one byte string: :func:`pack` lays the same frames out behind a small
length table and ends it with a CRC-32C of the whole record, and :func:`unpack` checks both before
decoding the frames in place, so a damaged record is an error, never a wrong datapoint.
"""

from __future__ import annotations

import math
import pickle
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import crc32c
import msgpack
import numpy as np
import zmq

from . import control
from .header import VERSION, ControlMessage, WireFormatError
from .interrupts import install_interrupt_rescue

__all__ = [
    "ALLOWED_DTYPES",
    "WireFormatError",
    "WireLimits",
    "decode",
    "decode_message",
    "encode",
    "pack",
    "recv_datapoint",
    "recv_frames",
    "send_datapoint",
    "send_frames",
    "send_part",
    "set_receive_limit",
    "unpack",
]

#: Bytes values this long or longer travel in a frame of their own rather than in the header.
BYTES_FRAME_MIN = 1024

# Received arrays view zmq frames, and pyzmq can lose a Ctrl-C while freeing one.
install_interrupt_rescue()

#: dtype strings accepted on the wire (little-endian numeric types and bool).
ALLOWED_DTYPES = frozenset(
    np.dtype(t).newbyteorder("<").str
    for t in (
        "bool",
        "int8",
        "uint8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "uint64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    )
)


_DTYPES = {s: np.dtype(s) for s in ALLOWED_DTYPES}
#: The same by dtype: looking an array's dtype up here costs a tenth of building its ``dtype.str``.
_DTYPE_STRS = {d: s for s, d in _DTYPES.items()}


@dataclass(frozen=True)
class WireLimits:
    """Upper bounds enforced on every received message (and, at their defaults, on every sent one)."""

    max_frames: int = 1024
    max_header_bytes: int = 1 << 20
    max_depth: int = 16
    max_nodes: int = 100_000
    max_ndim: int = 32
    max_array_bytes: int = 1 << 31

    @property
    def max_frame_bytes(self) -> int:
        """The largest frame a message within these limits can have (a header or an array)."""
        return max(self.max_header_bytes, self.max_array_bytes)


DEFAULT_LIMITS = WireLimits()


def set_receive_limit(sock: zmq.Socket, limits: WireLimits = DEFAULT_LIMITS) -> None:
    """Make ZMQ drop a peer that sends a frame larger than any message within ``limits`` can have.

    ZMQ checks this size per frame while receiving, before the frame is stored, so an oversized
    message costs the receiver no memory (the sender is disconnected and may reconnect).
    """
    sock.setsockopt(zmq.MAXMSGSIZE, limits.max_frame_bytes)


# ---------------------------------------------------------------------------------------------
# Encoding


_MAX_NDIM = DEFAULT_LIMITS.max_ndim
_MAX_ARRAY_BYTES = DEFAULT_LIMITS.max_array_bytes
#: Every header node takes at least this many bytes, so smaller headers cannot exceed max_nodes.
_MIN_NODE_BYTES = 3


def _check_array_limits(arr: np.ndarray) -> None:
    if arr.ndim > _MAX_NDIM:
        raise WireFormatError(f"array with {arr.ndim} dimensions is over the limit of {_MAX_NDIM}")
    if arr.nbytes > _MAX_ARRAY_BYTES:
        raise WireFormatError(f"array of {arr.nbytes} bytes is over the limit of {_MAX_ARRAY_BYTES}")


def _encode_node(obj: Any, frames: list, allow_pickle: bool, depth: int) -> Any:
    if depth > DEFAULT_LIMITS.max_depth:
        raise WireFormatError(f"datapoint nested deeper than {DEFAULT_LIMITS.max_depth} levels")
    if type(obj) is np.ndarray and obj.flags.c_contiguous:  # the common case, kept fast
        dstr = obj.dtype.str
        if dstr in _DTYPES and 0 < obj.ndim <= _MAX_NDIM and obj.nbytes <= _MAX_ARRAY_BYTES:
            frames.append(obj)
            return ["a", dstr, list(obj.shape)]
    if isinstance(obj, np.ndarray):
        _check_array_limits(obj)
        arr = obj
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        if arr.dtype.str not in ALLOWED_DTYPES:
            if allow_pickle:
                frames.append(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
                return ["p"]
            raise WireFormatError(
                f"arrays of dtype {obj.dtype} cannot be sent without pickle "
                f"(allowed: numeric and bool dtypes)"
            )
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        frames.append(arr if arr.ndim else arr.reshape(1))
        return ["a", arr.dtype.str, list(arr.shape)]
    if isinstance(obj, np.generic):
        return _encode_node(np.asarray(obj), frames, allow_pickle, depth)
    if isinstance(obj, bytes) and len(obj) >= BYTES_FRAME_MIN:
        if len(obj) > _MAX_ARRAY_BYTES:
            raise WireFormatError(
                f"a bytes value of {len(obj)} bytes is over the limit of {_MAX_ARRAY_BYTES}"
            )
        frames.append(obj)
        return ["b", len(obj)]
    if obj is None or isinstance(obj, (bool, int, float, str, bytes)):
        if isinstance(obj, int) and not isinstance(obj, bool) and not -(2**63) <= obj < 2**64:
            raise WireFormatError(f"integer {obj} does not fit in 64 bits")
        return ["v", obj]
    if isinstance(obj, list):
        return ["l", [_encode_node(x, frames, allow_pickle, depth + 1) for x in obj]]
    if isinstance(obj, tuple):
        return ["t", [_encode_node(x, frames, allow_pickle, depth + 1) for x in obj]]
    if isinstance(obj, dict):
        items = []
        for k, v in obj.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise WireFormatError(f"dict keys must be str or int, got {type(k).__name__}")
            items.append([k, _encode_node(v, frames, allow_pickle, depth + 1)])
        return ["d", items]
    if allow_pickle:
        _refuse_control(obj)
        frames.append(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
        return ["p"]
    raise WireFormatError(
        f"cannot send an object of type {type(obj).__name__} without pickle; "
        "use numpy arrays, numbers, strings, bytes, lists, tuples and dicts"
    )


def _count_nodes(node: list) -> int:
    if node[0] in ("l", "t"):
        return 1 + sum(_count_nodes(c) for c in node[1])
    if node[0] == "d":
        return 1 + sum(_count_nodes(c) for _, c in node[1])
    return 1


def _check_message_limits(header: bytes, tree: list, nframes: int) -> None:
    """Refuse to send what every receiver with the default :class:`WireLimits` would reject."""
    limits = DEFAULT_LIMITS
    if nframes > limits.max_frames:
        raise WireFormatError(
            f"datapoint has {nframes} arrays and large bytes values, over the wire limit of "
            f"{limits.max_frames} frames (WireLimits.max_frames): stack them into fewer arrays "
            "or put fewer items in one datapoint"
        )
    if len(header) > limits.max_header_bytes:
        raise WireFormatError(
            f"datapoint header is {len(header)} bytes, over the wire limit of {limits.max_header_bytes} "
            "(WireLimits.max_header_bytes): numbers, strings and bytes values shorter than "
            f"{BYTES_FRAME_MIN} bytes travel in the header; send them as numpy arrays, send long "
            "strings as bytes, or put fewer items in one datapoint"
        )
    if len(header) > _MIN_NODE_BYTES * limits.max_nodes and _count_nodes(tree) > limits.max_nodes:
        raise WireFormatError(
            f"datapoint has more than {limits.max_nodes} values (WireLimits.max_nodes): "
            "send them as numpy arrays, or put fewer items in one datapoint"
        )


#: Headers of datapoints by their layout (:func:`_layout`): a stream of same-shaped batches builds
#: its header once.
_HEADERS: dict[tuple, bytes] = {}
_MAX_HEADERS = 256
_MAX_CACHED_HEADER = 4096
_LAYOUT_SCALARS = (int, bool, str, type(None))  # travel in the header as they are
_MAX_LAYOUT_ITEMS = 256  # longer lists are encoded in full (their header is rarely the same twice)


def _layout(obj: Any, frames: list, depth: int = 0) -> tuple | None:
    """What a datapoint's header depends on, collecting its arrays into ``frames``: the types of its
    lists and tuples, each array's dtype and shape, and its scalars; None for anything else (dicts,
    bytes, floats, arrays that :func:`_encode_node` would convert), which is encoded in full."""
    t = type(obj)
    if t is np.ndarray:
        dstr = _DTYPE_STRS.get(obj.dtype)
        if dstr is not None and obj.ndim and obj.flags.c_contiguous:
            frames.append(obj)
            return dstr, obj.shape
        return None
    if t is list or t is tuple:
        if depth >= DEFAULT_LIMITS.max_depth or len(obj) > _MAX_LAYOUT_ITEMS:
            return None
        key: list = [t]
        for x in obj:
            k = _layout(x, frames, depth + 1)
            if k is None:
                return None
            key.append(k)
        return tuple(key)
    if t in _LAYOUT_SCALARS:
        return t, obj
    return None


def encode(dp: Any, allow_pickle: bool = False) -> list:
    """Encode a datapoint as a list of frames (header bytes, then arrays as zero-copy buffers).

    Raises :class:`WireFormatError` for what cannot be sent, including datapoints over the
    receivers' default :class:`WireLimits` (too many frames, too large a header).
    """
    frames: list = []
    layout = _layout(dp, frames)
    if layout is not None:
        header = _HEADERS.get(layout)
        if header is not None:
            return [header, *frames]
    frames = []
    tree = _encode_node(dp, frames, allow_pickle, 0)
    header = msgpack.packb({"v": VERSION, "k": "dp", "s": tree}, use_bin_type=True)
    _check_message_limits(header, tree, len(frames))
    if layout is not None and len(header) <= _MAX_CACHED_HEADER:
        if len(_HEADERS) >= _MAX_HEADERS:
            _HEADERS.clear()
        _HEADERS[layout] = header
    return [header, *frames]


# ---------------------------------------------------------------------------------------------
# Decoding


def _frame_len(frame: Any) -> int:
    if isinstance(frame, zmq.Frame):
        return len(frame)
    return memoryview(frame).nbytes


def _frame_bytes(frame: Any) -> bytes:
    return frame.bytes if isinstance(frame, zmq.Frame) else bytes(frame)


#: What a plan is: it builds a datapoint from a message's frames (and whether pickle is allowed).
Builder = Callable[[list, bool], Any]


class _Planner:
    """Validates a datapoint header and turns it into a plan: a :data:`Builder` made of one small
    function per node of the structure, the checks that depend on the header alone already done.

    Building checks what depends on the frames (their lengths). Plans depend on the header alone, so
    they are cached by header bytes: a stream of same-shaped batches pays for validation once, and
    then for little more than viewing its frames.
    """

    def __init__(self, limits: WireLimits) -> None:
        self.nframes = 0
        self.nodes = 0
        self.uncacheable = False
        self.limits = limits
        self.max_nodes, self.max_depth, self.max_ndim = limits.max_nodes, limits.max_depth, limits.max_ndim

    def node(self, n: Any, depth: int) -> Builder:
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise WireFormatError(f"header has more than {self.max_nodes} nodes")
        if depth > self.max_depth:
            raise WireFormatError(f"header nested deeper than {self.max_depth} levels")
        if type(n) is not list or not n:
            raise WireFormatError(f"malformed structure node {_short(n)}")
        tag = n[0]
        if tag == "a" and len(n) == 3:
            return self.array(n[1], n[2])
        if tag == "v" and len(n) == 2:
            if not (n[1] is None or isinstance(n[1], (bool, int, float, str, bytes))):
                raise WireFormatError(f"malformed value node {_short(n)}")
            return _value_builder(n[1])
        if tag in ("l", "t") and len(n) == 2 and type(n[1]) is list:
            return _sequence_builder(tag == "t", [self.node(c, depth + 1) for c in n[1]])
        if tag == "d" and len(n) == 2 and type(n[1]) is list:
            items = []
            for item in n[1]:
                if type(item) is not list or len(item) != 2 or type(item[0]) not in (str, int):
                    raise WireFormatError(f"malformed dict item {_short(item)}")
                items.append((item[0], self.node(item[1], depth + 1)))
            return _dict_builder(items)
        if tag == "b" and len(n) == 2:
            size = n[1]
            if type(size) is not int or not 0 <= size <= self.limits.max_array_bytes:
                raise WireFormatError(f"malformed bytes node {_short(n)}")
            self.uncacheable = True  # lengths vary from message to message
            self.nframes += 1
            return _bytes_builder(size, self.nframes)
        if tag == "p" and len(n) == 1:
            self.uncacheable = True
            self.nframes += 1
            return _pickled_builder(self.nframes)
        raise WireFormatError(f"unknown structure node {_short(n)}")

    def array(self, dtype_str: Any, shape: Any) -> Builder:
        dtype = _DTYPES.get(dtype_str) if type(dtype_str) is str else None
        if dtype is None:
            raise WireFormatError(f"dtype {_short(dtype_str)} is not allowed on the wire")
        if type(shape) is not list or len(shape) > self.max_ndim:
            raise WireFormatError(f"malformed shape {_short(shape)}")
        for d in shape:
            if type(d) is not int or d < 0:  # bool is not int here
                raise WireFormatError(f"malformed shape {_short(shape)}")
        # A zero dimension must not hide huge others: numpy refuses such shapes even when empty.
        extent = math.prod(d or 1 for d in shape) * dtype.itemsize
        if extent > self.limits.max_array_bytes:
            raise WireFormatError(
                f"array of shape {shape} and dtype {dtype} spans {extent} bytes, "
                f"over the limit of {self.limits.max_array_bytes}"
            )
        self.nframes += 1
        return _array_builder(dtype, tuple(shape), math.prod(shape) * dtype.itemsize, self.nframes)


def _array_builder(dtype: np.dtype, shape: tuple, nbytes: int, index: int) -> Builder:
    flat = len(shape) == 1  # frombuffer's own shape

    def build(frames: list, allow_pickle: bool) -> np.ndarray:
        frame = frames[index]
        flen = len(frame) if type(frame) is zmq.Frame else _frame_len(frame)
        if flen != nbytes:
            raise WireFormatError(
                f"array of shape {list(shape)} and dtype {dtype} needs {nbytes} bytes "
                f"but its frame has {flen}"
            )
        if nbytes == 0:
            return np.empty(shape, dtype)
        # A zmq.Frame is a buffer itself: viewing it directly costs a fifth of viewing its .buffer.
        arr = np.frombuffer(frame, dtype)
        return arr if flat else arr.reshape(shape)

    return build


def _value_builder(value: Any) -> Builder:
    return lambda frames, allow_pickle: value


def _sequence_builder(is_tuple: bool, parts: list[Builder]) -> Builder:
    if is_tuple:
        return lambda frames, allow_pickle: tuple([part(frames, allow_pickle) for part in parts])
    return lambda frames, allow_pickle: [part(frames, allow_pickle) for part in parts]


def _dict_builder(items: list[tuple[Any, Builder]]) -> Builder:
    return lambda frames, allow_pickle: {key: part(frames, allow_pickle) for key, part in items}


def _bytes_builder(size: int, index: int) -> Builder:
    def build(frames: list, allow_pickle: bool) -> bytes:
        flen = _frame_len(frames[index])
        if flen != size:
            raise WireFormatError(f"bytes value needs {size} bytes but its frame has {flen}")
        return _frame_bytes(frames[index])

    return build


def _pickled_builder(index: int) -> Builder:
    def build(frames: list, allow_pickle: bool) -> Any:
        if not allow_pickle:
            raise WireFormatError(
                "message contains a pickled object but pickle is not enabled "
                "(pass allow_pickle=True on both ends to allow it)"
            )
        try:
            obj = pickle.loads(_frame_bytes(frames[index]))
        except Exception as e:
            raise WireFormatError(
                f"pickled object cannot be loaded ({type(e).__name__}: {_short(str(e))})"
            ) from None
        _refuse_control(obj)
        return obj

    return build


def _refuse_control(obj: Any) -> None:
    """Keep a control message from travelling (pickled) as a datapoint, where it would pass for one."""

    if isinstance(obj, (control.Message, ControlMessage)):
        raise WireFormatError(f"a control message ({type(obj).__name__}) cannot travel as a datapoint")


#: Plans of headers validated under DEFAULT_LIMITS, by header bytes.
_PLANS: dict[bytes, tuple[Builder, int]] = {}
_MAX_PLANS = 256
#: Control messages decoded before, by header bytes (credits, windows and pings repeat all the time;
#: the messages are frozen). Only short headers are kept.
_CONTROLS: dict[bytes, control.Message] = {}
_MAX_CONTROLS = 256
_MAX_CACHED_CONTROL = 64


def _short(obj: Any) -> str:
    text = repr(obj)
    return text if len(text) <= 80 else text[:77] + "..."


def decode_message(frames: list, allow_pickle: bool = False, limits: WireLimits = DEFAULT_LIMITS) -> Any:
    """Decode a received message: a datapoint, or a typed control message
    (a :class:`towerpack.dataflow.wire.control.Message`) for other kinds.

    ``frames`` are ``zmq.Frame`` objects (from :func:`recv_frames`) or bytes-like.
    Raises :class:`WireFormatError` for anything malformed, and for nothing else.
    """
    if len(frames) == 1:
        size = _frame_len(frames[0])
        if size <= _MAX_CACHED_CONTROL and size <= limits.max_header_bytes:
            msg = _CONTROLS.get(_frame_bytes(frames[0]))
            if msg is not None:
                return msg
    is_control, out = _decode_checked(frames, allow_pickle, limits)
    if not is_control:
        return out
    msg = control.decode(out)
    if _frame_len(frames[0]) <= _MAX_CACHED_CONTROL:
        if len(_CONTROLS) >= _MAX_CONTROLS:
            _CONTROLS.clear()
        _CONTROLS[_frame_bytes(frames[0])] = msg
    return msg


def _decode_checked(frames: list, allow_pickle: bool, limits: WireLimits) -> tuple[bool, Any]:
    try:
        return _decode_message(frames, allow_pickle, limits)
    except WireFormatError:
        raise
    except Exception as e:  # a case the checks missed must still not end a receiver
        raise WireFormatError(f"malformed message ({type(e).__name__}: {_short(str(e))})") from None


def _decode_message(frames: list, allow_pickle: bool, limits: WireLimits) -> tuple[bool, Any]:
    """``(False, datapoint)``, or ``(True, ControlMessage)`` for a control message's raw header."""
    if not frames:
        raise WireFormatError("empty message")
    if len(frames) > limits.max_frames + 1:
        raise WireFormatError(f"message has {len(frames)} frames, over the limit of {limits.max_frames}")
    if _frame_len(frames[0]) > limits.max_header_bytes:
        raise WireFormatError(
            f"header of {_frame_len(frames[0])} bytes is over the limit of {limits.max_header_bytes}"
        )
    raw = _frame_bytes(frames[0])
    plan = _PLANS.get(raw) if limits is DEFAULT_LIMITS else None
    if plan is not None:  # a header seen before: already validated
        return False, _build_checked(plan, frames, allow_pickle)
    try:
        header = msgpack.unpackb(raw, raw=False, strict_map_key=True)
    except Exception as e:  # msgpack raises several unrelated types for bad input
        raise WireFormatError(f"header is not valid msgpack ({type(e).__name__}: {e})") from None
    if (
        not isinstance(header, dict)
        or type(header.get("v")) is not int  # not a bool, which would equal 1
        or header["v"] != VERSION
        or not isinstance(header.get("k"), str)
    ):
        raise WireFormatError(f"header is not a version-{VERSION} message header: {_short(header)}")
    kind = header["k"]
    if kind != "dp":
        if len(frames) != 1:
            raise WireFormatError(f"control message {kind!r} must have one frame, got {len(frames)}")
        return True, ControlMessage(kind, {k: v for k, v in header.items() if k not in ("v", "k")})
    if "s" not in header:
        raise WireFormatError("datapoint header has no structure")
    planner = _Planner(limits)
    plan = (planner.node(header["s"], 0), planner.nframes)
    if not planner.uncacheable and limits is DEFAULT_LIMITS:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        _PLANS[raw] = plan
    return False, _build_checked(plan, frames, allow_pickle)


def _build_checked(plan: tuple[Builder, int], frames: list, allow_pickle: bool) -> Any:
    build, nframes = plan
    if nframes != len(frames) - 1:
        raise WireFormatError(f"message has {len(frames) - 1} data frames but its header uses {nframes}")
    return build(frames, allow_pickle)


def decode(frames: list, allow_pickle: bool = False, limits: WireLimits = DEFAULT_LIMITS) -> Any:
    """Decode a datapoint message; raises :class:`WireFormatError` for control messages too."""
    is_control, out = _decode_checked(frames, allow_pickle, limits)
    if is_control:
        raise WireFormatError(f"expected a datapoint, got a {_short(out.kind)} control message")
    return out


# ---------------------------------------------------------------------------------------------
# Records: one datapoint as one byte string (files)

#: ``u32`` frame count, then one ``u64`` length per frame, then the frames, each 8-byte aligned,
#: then (when the count has ``_CHECKED`` set) a ``u32`` CRC-32C of everything before it.
_COUNT = struct.Struct("<I")
_ALIGN = 8
#: Set in the frame count of records that end with their checksum (records of older versions do not).
_CHECKED = 1 << 31
_CRC = struct.Struct("<I")


def _padding(n: int) -> int:
    return -n % _ALIGN


def pack(dp: Any, allow_pickle: bool = False) -> bytes:
    """Encode a datapoint as one byte string: the frames of :func:`encode` behind a length table.

    Arrays start at multiples of 8 bytes from the start of the record, so :func:`unpack` gives
    aligned arrays when the record sits in an aligned buffer.
    """
    frames = [
        memoryview(f.reshape(-1).view(np.uint8)) if isinstance(f, np.ndarray) else memoryview(f)
        for f in encode(dp, allow_pickle)
    ]
    table = _COUNT.pack(len(frames) | _CHECKED) + struct.pack(f"<{len(frames)}Q", *(f.nbytes for f in frames))
    parts = [table, bytes(_padding(len(table)))]
    for f in frames:
        parts += [f, bytes(_padding(f.nbytes))]
    body = b"".join(parts)
    return body + _CRC.pack(crc32c.crc32c(body))


def unpack(record: Any, allow_pickle: bool = False, limits: WireLimits = DEFAULT_LIMITS) -> Any:
    """Decode a record made by :func:`pack`; arrays are views of ``record`` (writable if it is).

    Raises :class:`WireFormatError` when the record is truncated, damaged or malformed.
    """
    buf = memoryview(record).cast("B")
    if buf.nbytes < _COUNT.size:
        raise WireFormatError(f"record of {buf.nbytes} bytes is too short for its frame count")
    (count,) = _COUNT.unpack_from(buf)
    checked = bool(count & _CHECKED)
    if checked:
        count &= ~_CHECKED
        if buf.nbytes < _CRC.size + _COUNT.size:
            raise WireFormatError(f"record of {buf.nbytes} bytes is too short for its checksum")
        (crc,) = _CRC.unpack_from(buf, buf.nbytes - _CRC.size)
        buf = buf[: buf.nbytes - _CRC.size]
        if crc32c.crc32c(buf) != crc:
            raise WireFormatError(f"record of {buf.nbytes + _CRC.size} bytes is damaged (checksum mismatch)")
    if not 1 <= count <= limits.max_frames + 1:
        raise WireFormatError(f"record declares {count} frames (limit {limits.max_frames + 1})")
    offset = _COUNT.size + 8 * count
    if buf.nbytes < offset:
        raise WireFormatError(f"record of {buf.nbytes} bytes is too short for its {count} frame lengths")
    lengths = struct.unpack_from(f"<{count}Q", buf, _COUNT.size)
    offset += _padding(offset)
    frames = []
    for n in lengths:
        if n > buf.nbytes - offset:
            raise WireFormatError(
                f"record of {buf.nbytes} bytes is truncated: a frame of {n} bytes is missing"
            )
        frames.append(buf[offset : offset + n])
        offset += n + _padding(n)
    if checked and offset != buf.nbytes:
        raise WireFormatError(f"record holds {buf.nbytes - offset} bytes after its last frame")
    return decode(frames, allow_pickle, limits)


# ---------------------------------------------------------------------------------------------
# Socket helpers


_MORE = int(zmq.SNDMORE)  # a plain int: combining pyzmq's flag enums costs more than a small send
#: ``send_part(socket, data, flags, copy)``: pyzmq's compiled send. ``zmq.Socket.send`` wraps it in Python
#: for the routing ids and groups of draft socket types, which the wire does not use; called directly, a
#: small send costs a third less.
send_part = getattr(zmq.backend, "Socket", zmq.Socket).send


def send_frames(socket: zmq.Socket, frames: list, flags: int = 0) -> None:
    """Send the frames of :func:`encode` as one message (or as the rest of one whose first parts went
    with ``SNDMORE``), ``flags`` on every part.

    Frames from pyzmq's copy threshold up go without a copy; smaller ones (the header, small arrays)
    are copied, as pyzmq would do anyway, but asked for directly: a third cheaper.
    """
    threshold, more, end = socket.copy_threshold, flags | _MORE, len(frames) - 1
    for i, frame in enumerate(frames):
        size = frame.nbytes if isinstance(frame, np.ndarray) else len(frame)
        send_part(socket, frame, more if i < end else flags, size < threshold)


def send_datapoint(socket: zmq.Socket, dp: Any, flags: int = 0, allow_pickle: bool = False) -> None:
    """Send one datapoint as a multipart message without copying its arrays."""
    send_frames(socket, encode(dp, allow_pickle), flags)


def recv_frames(socket: zmq.Socket, flags: int = 0) -> list[zmq.Frame]:
    """Receive one multipart message as ``zmq.Frame`` objects, without copies.

    As ``recv_multipart(copy=False)``, at half its cost: each frame says whether more follow, where
    pyzmq asks the socket (a ``getsockopt``) after every part. ``flags`` apply to the first part; the
    others are there once it is.
    """
    recv = socket.recv
    frames = [recv(flags, copy=False)]
    while frames[-1].more:
        frames.append(recv(0, copy=False))
    return frames


def recv_datapoint(
    socket: zmq.Socket, flags: int = 0, allow_pickle: bool = False, limits: WireLimits = DEFAULT_LIMITS
) -> Any:
    """Receive one datapoint; its arrays are views of the received frames."""
    return decode(recv_frames(socket, flags), allow_pickle, limits)
