"""Datasets on disk: the four serializers on real files, sharded sequential readers, the CLI."""

import collections
import subprocess

import h5py
import lmdb
import numpy as np
import pytest

from support.dataflow_server import dataflow_cmd, dataflow_env
from towerpack.dataflow import (
    DataFromList,
    HDF5Serializer,
    LMDBData,
    LMDBDataDecoder,
    LMDBSerializer,
    MultiProcessRunnerZMQ,
    NumpySerializer,
    ShardData,
    TFRecordData,
    TFRecordSerializer,
    WireFormatError,
)
from towerpack.dataflow.formats.tfrecord import TFRecordError
from towerpack.dataflow.pipeline import sharding


def points(n=50):
    return [
        {
            "img": np.full((3, 4), i, "uint8"),
            "id": np.int64(i),
            "name": f"p{i}",
            "raw": bytes([i % 256]) * 2000,
        }
        for i in range(n)
    ]


def source(n=50):
    return DataFromList(points(n), shuffle=False)


def ids(df):
    df.reset_state()
    return [int(dp["id"]) for dp in df]


SAVE_LOAD = {
    "lmdb": (lambda df, p: LMDBSerializer.save(df, p), lambda p, **kw: LMDBSerializer.load(p, **kw)),
    "tfrecord": (
        lambda df, p: TFRecordSerializer.save(df, p),
        lambda p, **kw: TFRecordSerializer.load(p, **kw),
    ),
    "npz": (lambda df, p: NumpySerializer.save(df, p), lambda p, **kw: NumpySerializer.load(p, **kw)),
}


@pytest.mark.parametrize("fmt", sorted(SAVE_LOAD))
def test_serializers_round_trip_datapoints_into_writable_arrays(tmp_path, fmt):
    save, load = SAVE_LOAD[fmt]
    path = tmp_path / f"data.{fmt}"
    assert save(source(), path) == 50
    df = load(path, shuffle=False)
    assert len(df) == 50
    df.reset_state()
    got = list(df)
    assert [int(dp["id"]) for dp in got] == list(range(50))
    for dp, want in zip(got, points(), strict=True):
        np.testing.assert_array_equal(dp["img"], want["img"])
        assert dp["name"] == want["name"] and dp["raw"] == want["raw"]
    got[0]["img"][0, 0] = 7  # decoded into a buffer of its own, not a read-only view
    shuffled = load(path, shuffle=True, block_size=4, shuffle_buffer=8)
    first, second = ids(shuffled), [int(dp["id"]) for dp in shuffled]
    assert sorted(first) == sorted(second) == list(range(50)) and first != second != list(range(50))


def test_lmdb_files_nothing_pickled_and_refuses_to_overwrite(tmp_path):
    path = tmp_path / "data.lmdb"
    LMDBSerializer.save(source(10), path)
    with pytest.raises(FileExistsError, match="already exists"):
        LMDBSerializer.save(source(10), path)
    env = lmdb.open(str(path), subdir=False, readonly=True, lock=False)
    with env.begin() as txn:
        keys = [bytes(k) for k, _ in txn.cursor()]
        assert keys == [f"{i:08}".encode() for i in range(10)] + [b"__keys__"]
        assert b"pickle" not in txn.get(b"00000003") and txn.get(b"00000003")[:4] != b"\x80\x04"
    env.close()
    raw = LMDBData(path, shuffle=False)
    raw.reset_state()
    assert [k for k, _ in raw] == keys[:-1] and all(isinstance(v, bytes) for _, v in raw)
    decoded = LMDBDataDecoder(raw, lambda k, v: None if k.endswith(b"3") else [k])
    decoded.reset_state()
    assert len(list(decoded)) == 9
    with pytest.raises(WireFormatError, match="pickle"):
        LMDBSerializer.save(DataFromList([[object()]], shuffle=False), tmp_path / "obj.lmdb")


def test_lmdb_database_written_by_other_tools_is_read_by_scanning_its_keys(tmp_path):
    path = tmp_path / "other"
    env = lmdb.open(str(path), map_size=1 << 24)
    with env.begin(write=True) as txn:
        for k in (b"b", b"a", b"c"):
            txn.put(k, k * 3)
        txn.put(b"__keys__", b"\x80\x04\x95 not our format")  # the reference pickles its key list
    env.close()
    df = LMDBData(path, shuffle=False)
    df.reset_state()
    assert list(df) == [[b"a", b"aaa"], [b"b", b"bbb"], [b"c", b"ccc"]]
    by_format = LMDBData(path, shuffle=False, keys=[b"c", b"a"])
    by_format.reset_state()
    assert [k for k, _ in by_format] == [b"c", b"a"]


def test_tfrecord_corruption_and_truncation_are_named(tmp_path):
    path = tmp_path / "data.tfrecord"
    TFRecordSerializer.save(source(5), path)
    blob = bytearray(path.read_bytes())
    blob[-10] ^= 0xFF
    (tmp_path / "bad.tfrecord").write_bytes(bytes(blob))
    bad = TFRecordData(tmp_path / "bad.tfrecord")
    bad.reset_state()
    with pytest.raises(TFRecordError, match="record 4 is corrupt"):
        list(bad)
    (tmp_path / "cut.tfrecord").write_bytes(path.read_bytes()[:-100])
    with pytest.raises(TFRecordError, match="truncated"):
        TFRecordData(tmp_path / "cut.tfrecord")
    with pytest.raises(ValueError, match="holds 5 records, not 6"):
        TFRecordSerializer.load(path, size=6)


def test_hdf5_reads_rows_in_slabs_and_checks_lengths(tmp_path):
    path = tmp_path / "data.h5"
    rows = DataFromList([[np.full(3, i, "float32"), np.int32(i)] for i in range(40)], shuffle=False)
    assert HDF5Serializer.save(rows, path, ["x", "y"]) == 40
    df = HDF5Serializer.load(path, ["x", "y"], shuffle=False)
    df.reset_state()
    got = list(df)
    assert [int(y) for _, y in got] == list(range(40)) and got[5][0].tolist() == [5.0] * 3
    df.close()
    with h5py.File(path, "a") as f:
        f.create_dataset("short", data=np.zeros(3))
    with pytest.raises(ValueError, match="differ in length"):
        HDF5Serializer.load(path, ["x", "short"])
    with pytest.raises(KeyError, match="no dataset 'nope'"):
        HDF5Serializer.load(path, ["nope"])


@pytest.mark.parametrize("remainder", ["uneven", "pad", "drop"])
def test_readers_split_every_epoch_among_ranks_and_workers(tmp_path, remainder):
    """3 ranks x 2 workers over 100 records: each record once (uneven), equal rank shares otherwise."""
    path = tmp_path / "data.tfrecord"
    TFRecordSerializer.save(DataFromList([{"id": np.int64(i)} for i in range(100)], shuffle=False), path)
    for epoch in range(2):
        seen, per_rank = [], collections.Counter()
        for rank in range(3):
            for worker in range(2):
                sharding.set_worker_info(sharding.WorkerInfo(worker, 2))
                try:
                    df = TFRecordSerializer.load(
                        path, shuffle=True, rank=rank, world_size=3, remainder=remainder
                    )
                    df.reset_state()
                    for _ in range(epoch):
                        list(df)
                    got = [int(dp["id"]) for dp in df]
                    assert len(got) == len(df)
                finally:
                    sharding.set_worker_info(None)
                seen += got
                per_rank[rank] += len(got)
        counts = collections.Counter(seen)
        if remainder == "uneven":
            assert sorted(seen) == list(range(100)) and sorted(per_rank.values()) == [33, 33, 34]
        elif remainder == "pad":
            assert set(seen) == set(range(100)) and sum(c - 1 for c in counts.values()) == 2
            assert set(per_rank.values()) == {34}
        else:
            assert len(counts) == len(seen) == 99 and set(per_rank.values()) == {33}


def test_reader_order_is_deterministic_for_a_seed(tmp_path):
    path = tmp_path / "data.lmdb"
    LMDBSerializer.save(source(200), path)

    def order(seed):
        return ids(LMDBSerializer.load(path, seed=seed, block_size=16))

    assert order(1) == order(1) != order(2)
    with pytest.raises(ValueError, match="already reads only this process's shard"):
        ShardData(LMDBSerializer.load(path))


def test_write_and_inspect_commands(tmp_path):
    out = tmp_path / "small.lmdb"
    env = dataflow_env()
    proc = subprocess.run(
        dataflow_cmd("write", "support.dataflow_factories:small", str(out)),
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"wrote 100 datapoints to {out} (lmdb)" in proc.stdout
    proc = subprocess.run(
        dataflow_cmd("inspect", str(out), "--size", "50"), capture_output=True, text=True, timeout=60, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert f"{out}: lmdb, 100 datapoints" in proc.stdout
    assert (
        "[0]: ndarray uint8 shape=[16, 16]" in proc.stdout and "[1]: ndarray int32 shape=[4]" in proc.stdout
    )
    assert "sequential read: 50 datapoints in" in proc.stdout
    for args, message in (
        (["write", "support.dataflow_factories:small", str(out)], "already exists"),
        (["write", "support.dataflow_factories:small", str(tmp_path / "x.bin")], "pass --format"),
        (["inspect", str(tmp_path / "missing.lmdb")], "does not exist"),
    ):
        proc = subprocess.run(dataflow_cmd(*args), capture_output=True, text=True, timeout=60, env=env)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_workers_read_an_lmdb_file_the_parent_has_open(tmp_path):
    """LMDB allows one open environment per file in a process, and forked workers inherit the
    parent's: a worker must still be able to open the file the parent is reading."""
    path = tmp_path / "ids.lmdb"
    LMDBSerializer.save(DataFromList([[np.int64(i)] for i in range(20)], shuffle=False), path)
    in_parent = LMDBSerializer.load(path, shuffle=False)
    in_parent.reset_state()
    assert len(list(in_parent)) == 20
    with MultiProcessRunnerZMQ(LMDBSerializer.load(path, shuffle=False), 2) as workers:
        workers.reset_state()
        assert sorted(int(dp[0]) for dp in workers) == list(range(20))
    assert [int(dp[0]) for dp in in_parent] == list(range(20))
