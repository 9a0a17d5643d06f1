"""Deterministic malformed wire messages for the dataflow tests (a seeded generator of cases)."""

from __future__ import annotations

import random

import msgpack
import numpy as np

from towerpack.dataflow.wire.codec import encode

BAD_DTYPES = ["|O", "<U4", "|S3", "<V8", ">f4", "object", "float32", "f4", "", "<f3", "<M8[s]", 5, None, [1]]
BAD_SHAPES = [[2**40, 2**40], [2**62], [-1], [1.5], [True], ["3"], None, 7, [1] * 40, [2**64 - 1, 2**64 - 1]]


def _header(structure, kind="dp", version=1):
    return msgpack.packb({"v": version, "k": kind, "s": structure}, use_bin_type=True)


def _valid(rng: random.Random) -> list:
    n = rng.randint(1, 3)
    arrays = [
        np.zeros([rng.randint(1, 5) for _ in range(rng.randint(1, 3))], dtype="float32") for _ in range(n)
    ]
    return [bytes(f) if isinstance(f, bytes) else np.asarray(f).tobytes() for f in encode(arrays)]


def _deep(depth: int):
    node = ["v", 1]
    for _ in range(depth):
        node = ["l", [node]]
    return node


def malformed_cases(seed: int = 1234, per_kind: int = 25) -> list[tuple[str, list[bytes]]]:
    """``(description, frames)`` pairs; every one must be rejected with ``WireFormatError``."""
    rng = random.Random(seed)
    cases: list[tuple[str, list[bytes]]] = []
    for i in range(per_kind):
        frames = _valid(rng)
        k = rng.randrange(1, len(frames))
        cut = rng.randint(1, len(frames[k]))
        cases.append(("truncated frame", [*frames[:k], frames[k][:-cut], *frames[k + 1 :]]))
        frames = _valid(rng)
        k = rng.randrange(1, len(frames))
        cases.append(
            ("oversized frame", [*frames[:k], frames[k] + b"\0" * rng.randint(1, 64), *frames[k + 1 :]])
        )
        frames = _valid(rng)
        cases.append(("missing frame", frames[:-1]))
        cases.append(("extra frame", [*frames, b"\0" * rng.randint(0, 16)]))
        dtype = rng.choice(BAD_DTYPES)
        cases.append((f"bad dtype {dtype!r}", [_header(["a", dtype, [2]]), b"\0" * 8]))
        shape = rng.choice(BAD_SHAPES)
        cases.append((f"bad shape {shape!r}", [_header(["l", [["a", "<f4", shape]]]), b"\0" * 16]))
        cases.append(("header garbage", [rng.randbytes(rng.randint(1, 64)), b"x"]))
        good = _header(["a", "<f4", [4]])
        cases.append(("truncated header", [good[: rng.randint(1, len(good) - 1)], b"\0" * 16]))
        other = rng.choice(
            [
                [1, 2],
                "text",
                5,
                None,
                {"v": 2, "k": "dp", "s": ["v", 1]},
                {"k": "dp"},
                {"v": 1, "k": 3},
                {"v": 1},
                {"v": 1, "k": "dp"},
            ]
        )
        cases.append((f"not a header {other!r}", [msgpack.packb(other)]))
        node = rng.choice(
            [
                ["x", 1],
                [],
                ["l"],
                ["l", 5],
                ["d", [[1.5, ["v", 1]]]],
                ["d", [["k"]]],
                ["v", [1, 2]],
                ["v", {"a": 1}],
                ["a", "<f4"],
                42,
                ["t", [["q"]]],
                [3, 4],
                ["d", [[True, ["v", 1]]]],
                ["p", 1],
            ]
        )
        cases.append((f"bad node {node!r}", [_header(node)]))
        cases.append(("pickle not enabled", [_header(["p"]), b"\x80\x04K\x01."]))
        cases.append(("too deep", [_header(_deep(rng.randint(17, 60)))]))
        cases.append(("control with data frames", [msgpack.packb({"v": 1, "k": "ping"}), b"\0" * 4]))
        if i % 8 == 0:  # costly to decode: a few are enough
            cases.append(("too many nodes", [_header(["l", [["v", 0]] * 100_001])]))
        cases.append(("too many frames", [_header(["l", [["a", "|u1", [1]]] * 1100]), *[b"\0"] * 1100]))
    return cases
