"""Damaged dataset files (cut short, bytes flipped) end in an error naming the file, or in the right data.

Never a signal (a truncated LMDB used to kill its reader with SIGBUS), a hang, another exception
type or a wrong datapoint: read in this process and through ``MultiProcessRunnerZMQ`` workers.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import cv2
import numpy as np
import pytest

from towerpack.dataflow import (
    DataFlowWorkerError,
    DataFromList,
    HDF5Serializer,
    ImageFromFile,
    LMDBSerializer,
    MultiProcessRunnerZMQ,
    NumpySerializer,
    TFRecordSerializer,
)
from towerpack.dataflow.dataset.files import DatasetFormatError as ReexportedError
from towerpack.dataflow.formats.errors import DatasetFormatError
from towerpack.dataflow.formats.tfrecord import TFRecordError
from towerpack.dataflow.image.decode import ImageDecodeError

N = 12
PAGE = 4096


def datapoints() -> list[list]:
    # 2560-byte arrays: larger than an LMDB node, so the database has overflow pages too
    return [[np.arange(640, dtype=np.float32).reshape(16, 40) + 1000 * i, np.int64(i)] for i in range(N)]


SAVE = {
    "lmdb": lambda df, p: LMDBSerializer.save(df, p, write_frequency=5),
    "tfrecord": TFRecordSerializer.save,
    "npz": NumpySerializer.save,
    "hdf5": lambda df, p: HDF5Serializer.save(df, p, ["x", "y"]),
}
LOAD = {
    "lmdb": lambda p, **kw: LMDBSerializer.load(p, shuffle=False, **kw),
    "tfrecord": lambda p, **kw: TFRecordSerializer.load(p, **kw),
    "npz": lambda p, **kw: NumpySerializer.load(p, shuffle=False, **kw),
    "hdf5": lambda p, **kw: HDF5Serializer.load(p, ["x", "y"], shuffle=False, **kw),
}
#: Offsets of format fields a flip must not slip past: LMDB's meta pages (magic, page size,
#: last page, transaction id of both), TFRecord's first length and its CRC, HDF5's superblock.
HEADER_FLIPS = {
    "lmdb": [16, 40, 136, 144, PAGE + 16, PAGE + 136, PAGE + 144],
    "tfrecord": [0, 3, 9],
    "npz": [0, 10, 30],
    "hdf5": [0, 8, 9, 20, 40],
}


@pytest.fixture(scope="module")
def originals(tmp_path_factory) -> dict[str, bytes]:
    root = tmp_path_factory.mktemp("good")
    out = {}
    for fmt, save in SAVE.items():
        path = root / f"data.{fmt}"
        assert save(DataFromList(datapoints(), shuffle=False), str(path)) == N
        out[fmt] = path.read_bytes()
    return out


def damaged(blob: bytes, fmt: str) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of cut and flipped copies of ``blob``."""
    n = len(blob)
    cuts = (64, n // 3, n // 2, n - 1) if fmt == "tfrecord" else (0, 64, n // 3, n // 2, n - 1)
    cases = [(f"cut{c}", blob[:c]) for c in cuts]  # (an empty TFRecord file holds no records)
    for off in sorted({*HEADER_FLIPS[fmt], n // 5, n // 3, n // 2, 2 * n // 3, n - 5}):
        copy = bytearray(blob)
        copy[off] ^= 0xFF
        cases.append((f"flip{off}", bytes(copy)))
    return cases


def same(got: list, want: list) -> bool:
    return len(got) == len(want) and all(
        np.array_equal(g[0], w[0]) and g[0].dtype == w[0].dtype and int(g[1]) == int(w[1])
        for g, w in zip(got, want, strict=True)
    )


def read_in_process(fmt: str, path: str) -> list:
    ds = LOAD[fmt](path, shard=False)
    ds.reset_state()
    return list(ds)


def read_in_workers(fmt: str, path: str) -> list:
    runner = MultiProcessRunnerZMQ(LOAD[fmt](path), 2)
    runner.reset_state()
    try:
        got = [next(iter_) for iter_ in [iter(runner)] for _ in range(len(runner))]
    finally:
        runner.close()
    return sorted(got, key=lambda dp: int(dp[1]))


def verdict(read, fmt: str, path: str) -> str:
    """``"error"`` (naming ``path``) or ``"ok"`` (all datapoints right); anything else fails."""
    try:
        got = read(fmt, path)
    except DatasetFormatError as e:
        assert path in str(e), e
        return "error"
    except DataFlowWorkerError as e:
        assert "DatasetFormatError" in str(e) or "TFRecordError" in str(e), e
        assert path in str(e), e
        return "error"
    if fmt == "tfrecord" and len(got) < N:
        # cut between records: a valid shorter file, which the record count given to load reports
        assert same(got, datapoints()[: len(got)]), f"{path}: wrong datapoints"
        with pytest.raises(DatasetFormatError, match=rf"{path} holds {len(got)} records, not {N}"):
            TFRecordSerializer.load(path, size=N)
        return "error"
    assert same(got, datapoints()), f"{path}: wrong datapoints"
    return "ok"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fmt", list(SAVE))
def test_every_damaged_copy_is_an_error_naming_the_file_or_the_right_data(fmt, originals, tmp_path):
    results = {}
    for name, blob in damaged(originals[fmt], fmt):
        path = str(tmp_path / f"{name}.{fmt}")
        with open(path, "wb") as f:
            f.write(blob)
        results[name] = verdict(read_in_process, fmt, path)
    cuts = {k: v for k, v in results.items() if k.startswith("cut")}
    assert set(cuts.values()) == {"error"}, cuts
    # a flip inside the records' data is always caught (checksums), never a wrong datapoint
    for off in {len(originals[fmt]) // 3, len(originals[fmt]) // 2}:
        assert results[f"flip{off}"] == "error", results


@pytest.mark.timeout(90)
@pytest.mark.parametrize("fmt", list(SAVE))
def test_damage_found_in_workers_reaches_the_consumer(fmt, originals, tmp_path):
    """The reader is made from the intact file, which is then damaged: the workers find it."""
    n = len(originals[fmt])
    flipped = bytearray(originals[fmt])
    flipped[n // 2] ^= 0xFF
    for name, blob in [("cut", originals[fmt][: n // 3]), ("flip", bytes(flipped))]:
        path = str(tmp_path / f"{name}.{fmt}")
        with open(path, "wb") as f:
            f.write(originals[fmt])
        runner = MultiProcessRunnerZMQ(LOAD[fmt](path), 2)
        with open(path, "wb") as f:
            f.write(blob)
        if fmt == "npz":  # loaded into memory when made: the damage is found by the loader
            with pytest.raises(DatasetFormatError, match=path):
                LOAD[fmt](path)
            continue
        with pytest.raises(DataFlowWorkerError, match=path):
            runner.reset_state()
            try:
                for _ in runner:
                    pass
            finally:
                runner.close()
    assert verdict(read_in_workers, fmt, str(tmp_path / f"flip.{fmt}")) == "error"


def test_truncated_lmdb_error_says_what_the_file_records_and_has(originals, tmp_path):
    blob = originals["lmdb"]
    path = tmp_path / "cut.lmdb"
    path.write_bytes(blob[: len(blob) // 3])
    with pytest.raises(
        DatasetFormatError, match=rf"records {len(blob)} bytes .* the file has {len(blob) // 3}"
    ):
        LMDBSerializer.load(path)
    shutil.copy(path, tmp_path / "copy.lmdb")
    assert issubclass(TFRecordError, DatasetFormatError) and ReexportedError is DatasetFormatError


def test_lmdb_flip_in_unused_space_reads_the_right_data(originals, tmp_path):
    copy = bytearray(originals["lmdb"])
    copy[1024] ^= 0xFF  # in meta page 0, after MDB_meta
    path = tmp_path / "flip.lmdb"
    path.write_bytes(bytes(copy))
    assert same(read_in_process("lmdb", str(path)), datapoints())


def test_lmdb_damaged_node_table_near_the_end_of_the_file_is_an_error_not_sigbus(originals, tmp_path):
    """LMDB trusts node offsets; one pointing past the file's end used to kill the reader with SIGBUS."""
    blob = originals["lmdb"]
    leaves = [
        pg
        for pg in range(2, len(blob) // PAGE)
        if struct.unpack_from("<QxxH", blob, pg * PAGE) == (pg, 2)  # a leaf page: its number, P_LEAF
    ]
    flips = []
    for leaf in (pg * PAGE for pg in leaves if len(blob) - pg * PAGE < 2 * 65536):
        (lower,) = struct.unpack_from("<H", blob, leaf + 12)
        flips += [leaf + 16 + 2 * node + 1 for node in range((lower - 16) // 2)]  # high byte of an offset
    assert len(flips) >= 10
    results = []
    for i, off in enumerate(flips):
        copy = bytearray(blob)
        copy[off] ^= 0xFF
        path = tmp_path / f"node{i}.lmdb"
        path.write_bytes(bytes(copy))
        results.append(verdict(read_in_process, "lmdb", str(path)))
    # leaf pages freed by earlier transactions are no longer read: their flips change nothing
    assert results.count("error") >= 10, results


@pytest.fixture
def jpegs(tmp_path) -> list[str]:
    rng = np.random.default_rng(0)
    paths = []
    for i in range(3):
        path = str(tmp_path / f"img{i}.jpg")
        assert cv2.imwrite(path, rng.integers(0, 256, (32 + 8 * i, 48, 3), dtype=np.uint8))
        paths.append(path)
    return paths


@pytest.mark.timeout(60)
def test_cut_or_damaged_jpeg_is_an_error_naming_the_file(jpegs):
    blob = Path(jpegs[1]).read_bytes()
    n = len(blob)
    good = ImageFromFile(jpegs)
    good.reset_state()
    assert [img.shape for (img,) in good] == [(32, 48, 3), (40, 48, 3), (48, 48, 3)]
    # JPEG has no checksum: a flip in its entropy-coded data decodes to a changed image, so only
    # truncation and damaged markers are checked here
    for name, data in [("third", blob[: n // 3]), ("half", blob[: n // 2]), ("short1", blob[:-1])]:
        with open(jpegs[1], "wb") as f:
            f.write(data)
        ds = ImageFromFile(jpegs)
        ds.reset_state()
        with pytest.raises(ImageDecodeError, match=jpegs[1]):
            list(ds)
        assert issubclass(ImageDecodeError, DatasetFormatError), name
    flipped = bytearray(blob)
    flipped[0] ^= 0xFF  # the start-of-image marker
    with open(jpegs[1], "wb") as f:
        f.write(bytes(flipped))
    runner = MultiProcessRunnerZMQ(ImageFromFile(jpegs), 2)
    runner.reset_state()
    try:
        with pytest.raises(DataFlowWorkerError, match=jpegs[1]):
            for _ in runner:
                pass
    finally:
        runner.close()
