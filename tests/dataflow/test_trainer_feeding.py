"""The dataflow feeding real trainers: uneven shards over 3 ranks, TFRecord files TensorFlow reads and
writes, and a CURVE data server read through ZMQInput."""

import collections
import subprocess
from pathlib import Path

import numpy as np
import pytest

from support.dataflow_server import ServerProcess, dataflow_cmd, dataflow_env
from support.input_driver import InputDriver
from support.launcher_run import launch
from support.procs import free_port
from towerpack.dataflow import (
    DataFromList,
    LMDBSerializer,
    TFRecordData,
    TFRecordSerializer,
    WireLimits,
    pack,
    unpack,
)
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.input_source import ZMQInput

SCRIPT = str(Path(__file__).parent / "scripts" / "uneven_train.py")
N = 100  # 3 ranks: 34 datapoints each with padding, 17 steps of 2 per epoch


def id_dataset(path):
    LMDBSerializer.save(
        DataFromList([[np.int64(i), np.full(4, i / N, "float32")] for i in range(N)], shuffle=False), path
    )


def check_equal_steps_and_coverage(out, ranks=3):
    ids = [np.load(out / f"ids.{r}.npy") for r in range(ranks)]
    assert [a.shape for a in ids] == [(34, 2)] * ranks  # 2 epochs x 17 steps on every rank
    for epoch in range(2):
        seen = np.concatenate([a[17 * epoch : 17 * (epoch + 1)].ravel() for a in ids]).tolist()
        counts = collections.Counter(seen)
        # Every datapoint of the epoch, and only 2 of them twice (the padding that evens out 100 / 3).
        assert sorted(counts) == list(range(N)) and sum(c - 1 for c in counts.values()) == 2
    return ids


@pytest.mark.multiprocess
@pytest.mark.horovod
@pytest.mark.timeout(180)
def test_three_horovod_ranks_with_worker_processes_run_equal_steps_over_100_datapoints(
    tmp_path, horovod_required
):
    id_dataset(tmp_path / "ids.lmdb")
    # Workers start after TensorFlow and Horovod are running: forked, as by default.
    proc = launch(
        "--np", "3", "--backend", "horovod", SCRIPT, str(tmp_path), str(tmp_path / "ids.lmdb"), "horovod",
        "--workers", "2", timeout=170,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    ids = check_equal_steps_and_coverage(tmp_path)
    assert not np.array_equal(ids[0][:17], ids[0][17:])  # a new order in the second epoch


@pytest.mark.multiprocess
@pytest.mark.timeout(180)
def test_three_tf_server_workers_run_equal_steps_over_100_datapoints(tmp_path):
    id_dataset(tmp_path / "ids.lmdb")
    proc = launch(
        "--backend", "tf-server", "--np", "3", "--ps", "1",
        SCRIPT, str(tmp_path), str(tmp_path / "ids.lmdb"), "tf-server", timeout=170,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "another worker has ended training" not in proc.stderr  # nobody stopped early
    check_equal_steps_and_coverage(tmp_path)


def dps(n=7):
    return [[np.arange(i + 1, dtype="float32"), f"dp{i}", {"k": np.array(i, "int64")}] for i in range(n)]


def test_tensorflow_reads_our_tfrecord_files_and_we_read_its(tmp_path):
    ours = tmp_path / "ours.tfrecord"
    TFRecordSerializer.save(DataFromList(dps(), shuffle=False), ours)
    with tf.Graph().as_default():
        nxt = tfv1.data.make_one_shot_iterator(tf.data.TFRecordDataset(str(ours))).get_next()
        records = []
        with tfv1.Session() as sess:
            try:
                while True:
                    records.append(sess.run(nxt))
            except tf.errors.OutOfRangeError:
                pass
    assert [repr(unpack(bytearray(r))) for r in records] == [repr(dp) for dp in dps()]

    theirs = tmp_path / "theirs.tfrecord"
    with tf.io.TFRecordWriter(str(theirs)) as w:
        for dp in dps():
            w.write(pack(dp))
        w.write(b"")  # an empty record is a record too
    raw = TFRecordData(theirs)
    raw.reset_state()
    assert len(raw) == 8 and list(raw)[-1] == b""
    df = TFRecordSerializer.load(str(theirs), size=8, shard=False, remainder="uneven")
    df.reset_state()
    it = iter(df)
    assert [repr(next(it)) for _ in range(7)] == [repr(dp) for dp in dps()]


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
def test_zmq_input_reads_a_curve_server_with_its_keys_limits_and_heartbeat(tmp_path):
    for directory, name in ((tmp_path / "keys", "server"), (tmp_path / "clients", "trainer")):
        subprocess.run(
            dataflow_cmd("keygen", str(directory), "--name", name), check=True, env=dataflow_env(), timeout=30
        )
    addr = f"tcp://127.0.0.1:{free_port()}"
    keys = [
        "--curve-secret-key",
        str(tmp_path / "keys" / "server.key_secret"),
        "--curve-authorized",
        str(tmp_path / "clients"),
    ]
    sig = [tf.TensorSpec([16, 16], tf.uint8, "img"), tf.TensorSpec([4], tf.int32, "label")]
    with ServerProcess("support.dataflow_factories:small", "--bind", addr, *keys) as server:
        server.wait_for_line("consumers connected: 0")
        src = ZMQInput(
            addr,
            hwm=4,
            curve_server_key=str(tmp_path / "keys" / "server.key"),
            curve_secret_key=str(tmp_path / "clients" / "trainer.key_secret"),
            limits=WireLimits(max_array_bytes=1 << 20),
            heartbeat=5.0,
        )
        assert src.ds.heartbeat == 5.0 and src.ds.limits.max_array_bytes == 1 << 20
        d = InputDriver(src, sig)
        outs, _ = d.build(lambda img, label: img)
        with d:
            d.before_train()
            got = [d.hooked.run(outs[0]) for _ in range(3)]
        assert all(g.shape == (16, 16) and g.dtype == np.uint8 for g in got)
        server.wait_for_line("consumers connected: 1")
