"""CollectiveAllReduceTrainer across real processes started by `launch --backend tf-collective`: TensorFlow's
collective all-reduce over gRPC on loopback, equivalence with one process at the total batch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from support.dist_models import FetchVariables, RankSlices, Regression64, regression_data, train_reference
from support.launcher_run import launch, signal_when
from support.procs import free_port, terminate_tree
from support.syncbn_model import SyncBNNet, syncbn_data
from towerpack.trainer import (
    CollectiveAllReduceTrainer,
    QueueInput,
    SimpleTrainer,
    TrainConfig,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf
from towerpack.trainer.graph_builder.packing import GradientPacker

pytestmark = [pytest.mark.multiprocess]

TESTS = str(Path(__file__).resolve().parents[2])
BATCH = 8
TOL = 1e-9  # float64; only the summation order of the averaged gradients differs
ENV = {"TF_CPP_MIN_LOG_LEVEL": "2"}

# The rank script: regression (optionally slow, for pre-emption) or the BatchNorm convnet.
RANK_SCRIPT = '''
import argparse, os, sys, time
from pathlib import Path
import numpy as np
p = argparse.ArgumentParser()
p.add_argument("tests"); p.add_argument("out")
p.add_argument("--model", default="regression"); p.add_argument("--batch", type=int, default=8)
p.add_argument("--epochs", type=int, default=2); p.add_argument("--preempt", action="store_true")
p.add_argument("--extra-var-rank", type=int, default=-1); p.add_argument("--stop-rank", type=int, default=-1)
p.add_argument("--timeout", type=float, default=600.0); p.add_argument("--pack-bytes", type=int)
a = p.parse_args()
sys.path.insert(0, a.tests)
from support.dist_models import FetchVariables, RankSlices, Regression64, StopAt, regression_data
from support.syncbn_model import SyncBNNet, syncbn_data
from towerpack.trainer import (AutoResumeTrainConfig, Callback, CollectiveAllReduceTrainer, ModelSaver,
                               TrainConfig, launch_train_with_config)
from towerpack.trainer.compat import tf, tfv1

assert os.environ.get("TOWERPACK_BACKEND", "tf-collective") == "tf-collective"  # set by launch
packing = {} if a.pack_bytes is None else {"pack_bytes": a.pack_bytes}
trainer = CollectiveAllReduceTrainer(timeout_s=a.timeout, **packing)
rank, size, out = trainer.rank, trainer.size, Path(a.out)

class RankVar(Callback):
    """A variable made by a callback, starting at 1000 x rank: the broadcast gives it rank 0's value."""
    _chief_only = False
    def _setup_graph(self):
        tfv1.get_variable("rank_var", initializer=tf.constant(1000.0 * rank, tf.float64), trainable=False)

class Record(Callback):
    """Pre-emption: 'start <epoch> <step>' and 'end <step>' per rank; rank 0 writes 'ready' at step 7."""
    _chief_only = False
    def _write(self, line):
        with open(out / f"steps.{rank}", "a") as f:
            f.write(line + "\\n")
    def _before_train(self):
        self._write(f"start {self.trainer.starting_epoch} {self.global_step}")
    def _trigger_step(self):
        time.sleep(0.05)
        if rank == 0 and self.global_step >= 7 and not (out / "ready").exists():
            (out / "ready").write_text("1")
    def _after_train(self):
        self._write(f"end {self.global_step}")

class Threads(Callback):
    """The process's threads after the first step and at the end ('threads.<rank>')."""
    _chief_only = False
    def _trigger_step(self):
        if self.global_step == 1:
            self.first = len(os.listdir("/proc/self/task"))
    def _after_train(self):
        (out / f"threads.{rank}").write_text(f"{self.first} {len(os.listdir('/proc/self/task'))}")

values = {}
if rank == a.extra_var_rank:
    tfv1.get_variable("only_here", initializer=tf.constant(1.0))
if a.preempt:  # one batch per rank, repeated: the weights depend on the number of steps only
    x, y = regression_data(a.batch * size)
    config = AutoResumeTrainConfig(
        model=Regression64(seed=1 + rank), dataflow=RankSlices(x, y, a.batch, rank, size),
        callbacks=[ModelSaver(), Record(), FetchVariables(values)], logdir=str(out),
        steps_per_epoch=5, max_epoch=3)
elif a.model == "syncbn":
    x, y = syncbn_data()
    config = TrainConfig(model=SyncBNNet("horovod"), dataflow=RankSlices(x, y, a.batch, rank, size),
                         callbacks=[FetchVariables(values)], monitors=[], max_epoch=a.epochs)
else:
    x, y = regression_data()
    config = TrainConfig(model=Regression64(seed=1 + rank), dataflow=RankSlices(x, y, a.batch, rank, size),
                         callbacks=[RankVar(), FetchVariables(values), Threads()]
                         + [StopAt(3)] * (rank == a.stop_rank),
                         monitors=[], max_epoch=a.epochs)
launch_train_with_config(config, trainer)
np.savez(out / f"vars.{rank}.npz", **{k.replace("/", "__"): v for k, v in values.items()})
(out / f"collectives.{rank}").write_text(str(trainer.group.instance_keys_used))
'''


def _script(tmp_path: Path) -> str:
    path = tmp_path / "collective_rank.py"
    path.write_text(RANK_SCRIPT)
    return str(path)


def _load(folder: Path, rank: int) -> dict[str, np.ndarray]:
    with np.load(folder / f"vars.{rank}.npz") as f:
        return {k.replace("__", "/"): f[k] for k in f.files}


def _run(tmp_path: Path, np_: int, *args: str, timeout: float = 100):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    command = ["--np", str(np_), "--backend", "tf-collective", _script(tmp_path), TESTS, str(out), *args]
    return launch(*command, env=ENV, timeout=timeout), out


@pytest.mark.timeout(120)
def test_two_ranks_match_simple_trainer_at_the_total_batch(tmp_path):
    proc, out = _run(tmp_path, 2, "--epochs", "2", "--batch", str(BATCH))
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = train_reference(batch=2 * BATCH, epochs=2)
    for r in range(2):
        got = _load(out, r)
        for name in ("w", "b", "w/Momentum"):
            np.testing.assert_allclose(
                got[name], expected[name], rtol=0, atol=TOL, err_msg=f"rank {r} {name}"
            )
        assert got["global_step"] == expected["global_step"] == 2 * (96 // (2 * BATCH))
        # Rank 1 started from other weights (seed 1 + rank) and rank_var 1000: rank 0's were broadcast.
        assert got["rank_var"] == 0.0
    assert "Broadcasting the global variables from rank 0" in proc.stderr


SYNCBN_COMPARED = ("conv0/W", "bn0/gamma", "bn0/beta", "bn0/mean/EMA", "bn0/variance/EMA", "conv1/W")
SYNCBN_COMPARED += ("conv1/bn/gamma", "conv1/bn/mean/EMA", "conv1/bn/variance/EMA", "fc/W", "fc/b")


@pytest.mark.timeout(120)
def test_synchronized_batch_norm_over_ranks_matches_one_process_at_the_total_batch(tmp_path):
    """BatchNorm(sync_statistics='horovod') means "over the job's processes": under this trainer
    the statistics (and their gradients) go through collective all-reduces."""
    batch = 4
    proc, out = _run(tmp_path, 2, "--model", "syncbn", "--batch", str(batch))
    assert proc.returncode == 0, proc.stderr[-3000:]
    x, y = syncbn_data()
    expected: dict = {}
    with tf.Graph().as_default():
        config = TrainConfig(
            model=SyncBNNet("nccl"),  # one tower: its own statistics
            data=QueueInput(RankSlices(x, y, 2 * batch)),
            callbacks=[FetchVariables(expected)],
            monitors=[],
            extra_callbacks=[],
            max_epoch=2,
        )
        launch_train_with_config(config, SimpleTrainer())
    assert not np.allclose(expected["bn0/mean/EMA"], 0)  # the statistics moved
    for r in range(2):
        got = _load(out, r)
        for name in SYNCBN_COMPARED:
            np.testing.assert_allclose(
                got[name], expected[name], rtol=1e-8, atol=1e-12, err_msg=f"rank {r} {name}"
            )


def _steps(folder: Path, rank: int) -> list[list[str]]:
    return [line.split() for line in (folder / f"steps.{rank}").read_text().splitlines()]


@pytest.mark.timeout(180)
def test_sigusr1_stops_every_rank_at_the_same_step_and_autoresume_finishes_like_one_run(tmp_path):
    batch = 2
    out = tmp_path / "out"
    out.mkdir()
    command = ["--np", "2", "--backend", "tf-collective", _script(tmp_path), TESTS, str(out), "--preempt"]
    command += ["--batch", str(batch)]
    code, _, err = signal_when((out / "ready").exists, *command, env=ENV, wait=90)
    assert code == 128 + signal.SIGUSR1, err[-3000:]
    ends = {int(_steps(out, r)[-1][1]) for r in (0, 1)}
    assert len(ends) == 1, ends  # both ranks stopped after the same step
    (stopped,) = ends
    assert 7 <= stopped < 15, stopped
    pointer = (out / "checkpoint").read_text().splitlines()[0]
    assert pointer == f'model_checkpoint_path: "model-{stopped}"', pointer

    (out / "ready").unlink()
    proc = launch(*command, env=ENV, timeout=100)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # A checkpoint mid-epoch resumes that epoch, one at its end the next one; each runs its 5 steps.
    epoch = stopped // 5 + 1
    total = stopped + (3 - epoch + 1) * 5
    for r in (0, 1):
        assert _steps(out, r)[-2:] == [["start", str(epoch), str(stopped)], ["end", str(total)]]
    # The same steps on the same batches in one process at the total batch, uninterrupted.
    x, y = regression_data(2 * batch)
    expected: dict = {}
    with tf.Graph().as_default():
        config = TrainConfig(
            model=Regression64(seed=1),
            dataflow=RankSlices(x, y, 2 * batch),
            callbacks=[FetchVariables(expected)],
            monitors=[],
            extra_callbacks=[],
            steps_per_epoch=total,
            max_epoch=1,
        )
        launch_train_with_config(config, SimpleTrainer())
    for r in (0, 1):
        got = _load(out, r)
        for name in ("w", "b", "w/Momentum", "global_step"):
            np.testing.assert_allclose(
                got[name], expected[name], rtol=0, atol=TOL, err_msg=f"rank {r} {name}"
            )


def test_ps_is_refused_with_the_collective_backend(tmp_path):
    proc = launch("--np", "2", "--ps", "1", "--backend", "tf-collective", _script(tmp_path), TESTS, "x")
    assert proc.returncode != 0
    assert "--ps needs --backend tf-server, got --backend tf-collective" in proc.stderr
    assert "the collective all-reduce has no parameter servers" in proc.stderr


@pytest.mark.timeout(120)
def test_ranks_that_built_different_graphs_fail_before_the_first_step(tmp_path):
    """A variable made in one rank only: without the check, the ranks would wait for each other's
    broadcasts forever."""
    proc, out = _run(tmp_path, 2, "--extra-var-rank", "1")
    assert proc.returncode == 1, proc.stderr[-3000:]
    for r in range(2):
        assert f"rank {r}: the ranks built different graphs" in proc.stderr
    assert not list(out.glob("vars.*"))


@pytest.mark.timeout(120)
def test_a_rank_that_stops_early_fails_the_others_after_timeout_s_with_an_explanation(tmp_path):
    proc, out = _run(tmp_path, 2, "--stop-rank", "1", "--timeout", "4")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Rank 0 waited more than timeout_s=4 s for the other ranks in a collective" in proc.stderr
    assert (out / "vars.1.npz").exists() and not (out / "vars.0.npz").exists()


@pytest.mark.timeout(120)
def test_a_tf_config_with_a_chief_task_makes_the_chief_rank_0_without_any_launcher(tmp_path):
    """A Kubernetes TFJob's cluster: ``chief`` and ``worker`` jobs, TF_CONFIG only."""
    out = tmp_path / "out"
    out.mkdir()
    cluster = {"chief": [f"127.0.0.1:{free_port()}"], "worker": [f"127.0.0.1:{free_port()}"]}
    procs = []
    for job in ("worker", "chief"):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": job, "index": 0}})
        env = dict(os.environ, TF_CONFIG=tf_config, **ENV)
        env.pop("TOWERPACK_BACKEND", None)
        command = [sys.executable, _script(tmp_path), TESTS, str(out), "--batch", str(BATCH)]
        procs.append(subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True))
    try:
        errors = [p.communicate(timeout=90)[1] for p in procs]
    finally:
        for p in procs:
            terminate_tree(p.pid)
            p.wait()
    assert [p.returncode for p in procs] == [0, 0], errors[0][-2000:] + errors[1][-2000:]
    assert "Collective rank 1 of 2" in errors[0] and "Collective rank 0 of 2" in errors[1]
    expected = train_reference(batch=2 * BATCH, epochs=2)
    for r in range(2):
        got = _load(out, r)
        np.testing.assert_allclose(got["w"], expected["w"], rtol=0, atol=TOL, err_msg=f"rank {r}")


def test_without_tf_config_it_is_a_one_rank_job_like_simple_trainer(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    x, y = regression_data()
    got: dict = {}
    with tf.Graph().as_default():
        trainer = CollectiveAllReduceTrainer()
        assert (trainer.rank, trainer.size, trainer.is_chief) == (0, 1, True)
        config = TrainConfig(
            model=Regression64(seed=1),
            dataflow=RankSlices(x, y, BATCH),
            callbacks=[FetchVariables(got)],
            monitors=[],
            extra_callbacks=[],
            max_epoch=2,
        )
        launch_train_with_config(config, trainer)
    expected = train_reference(batch=BATCH, epochs=2)
    for name in ("w", "b", "global_step"):
        np.testing.assert_allclose(got[name], expected[name], rtol=0, atol=TOL, err_msg=name)


def test_a_cluster_with_parameter_servers_is_refused(monkeypatch):
    cluster = {"worker": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}}))
    with pytest.raises(
        ValueError, match=r"without parameter servers; this is task worker:0 of a cluster with"
    ):
        CollectiveAllReduceTrainer()


@pytest.mark.timeout(180)
def test_packed_gradients_train_like_one_all_reduce_per_variable_with_fewer_collectives(tmp_path):
    """pack_bytes=96: the convnet's gradients (float64, 8 variables of 8 to 648 bytes) go in a few
    buffers; pack_bytes=0: one all-reduce per variable."""
    runs = {}
    for pack in (96, 0):
        folder = tmp_path / f"pack{pack}"
        folder.mkdir()
        proc, out = _run(
            folder, 2, "--model", "syncbn", "--batch", "4", "--epochs", "1", "--pack-bytes", str(pack)
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[pack] = out
    packed, unpacked = _load(runs[96], 0), _load(runs[0], 0)
    assert sorted(packed) == sorted(unpacked)
    for name in SYNCBN_COMPARED:
        np.testing.assert_allclose(packed[name], unpacked[name], rtol=0, atol=1e-6, err_msg=name)
    for r in (0, 1):
        np.testing.assert_array_equal(_load(runs[96], r)["fc/W"], packed["fc/W"], err_msg=f"rank {r}")
    # 8 gradients in 4 all-reduces: the two kernels alone, the 4 gammas and betas (96 bytes) in
    # one buffer, fc/W and fc/b in another.
    count = {p: {int((runs[p] / f"collectives.{r}").read_text()) for r in (0, 1)} for p in runs}
    assert len(count[96]) == len(count[0]) == 1, count
    assert count[0].pop() - count[96].pop() == 4, count


def _packer_values(packer: GradientPacker, arrays: list[np.ndarray]):
    with tf.Graph().as_default():
        tensors = [tf.constant(a) for a in arrays]
        buffers = packer.pack(tensors)
        restored = packer.unpack(buffers)
        with tf.compat.v1.Session() as sess:
            return sess.run(buffers), sess.run(restored)


def test_gradient_packer_fills_buffers_of_one_dtype_up_to_the_threshold_and_restores_every_tensor():
    rng = np.random.RandomState(0)
    arrays = [
        rng.normal(size=(3, 4)).astype(np.float32),  # 48 bytes
        rng.normal(size=(5,)),  # float64, 40 bytes
        rng.normal(size=(2, 2, 2)).astype(np.float32),  # 32 bytes: buffer 0 reaches 80
        np.arange(6, dtype=np.int32),  # 24 bytes, a dtype of its own
        rng.normal(size=(4,)).astype(np.float32),  # 16 bytes: buffer 0 would pass 80, a new one
        rng.normal(size=(30,)).astype(np.float32),  # 120 bytes: alone, not reshaped
        rng.normal(size=(3,)),  # float64, joins the other
    ]
    packer = GradientPacker([a.dtype for a in arrays], [a.shape for a in arrays], threshold_bytes=80)
    assert packer.num_buffers == 5
    assert packer.dtypes == [tf.float32, tf.float64, tf.int32, tf.float32, tf.float32]
    assert [s.as_list() for s in packer.shapes] == [[20], [8], [6], [4], [30]]
    buffers, restored = _packer_values(packer, arrays)
    np.testing.assert_array_equal(buffers[0], np.concatenate([arrays[0].ravel(), arrays[2].ravel()]))
    np.testing.assert_array_equal(buffers[1], np.concatenate([arrays[1], arrays[6]]))
    np.testing.assert_array_equal(buffers[4], arrays[5])
    for got, want in zip(restored, arrays, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_gradient_packer_without_threshold_or_static_shape_leaves_tensors_alone():
    arrays = [np.ones((2, 3), np.float32), np.zeros((4,), np.float32)]
    unpacked = GradientPacker([a.dtype for a in arrays], [a.shape for a in arrays], threshold_bytes=0)
    assert unpacked.num_buffers == 2 and [s.as_list() for s in unpacked.shapes] == [[2, 3], [4]]
    buffers, _ = _packer_values(unpacked, arrays)
    np.testing.assert_array_equal(buffers[0], arrays[0])
    unknown = GradientPacker(
        [tf.float32, tf.float32, tf.float32], [[None, 3], [2], [2]], threshold_bytes=1 << 20
    )
    assert unknown.num_buffers == 2 and unknown.shapes[0].as_list() == [None, 3]


def test_gradient_packer_rejects_bad_arguments_with_their_values():
    with pytest.raises(ValueError, match=r"threshold_bytes must be an int >= 0, got -1"):
        GradientPacker([tf.float32], [[2]], threshold_bytes=-1)
    with pytest.raises(ValueError, match=r"2 dtypes but 1 shapes"):
        GradientPacker([tf.float32, tf.float32], [[2]])
    packer = GradientPacker([tf.float32, tf.float32], [[2], [2]])
    with pytest.raises(ValueError, match=r"built for 2 tensors, got 1"):
        packer.pack([tf.zeros([2])])
    with pytest.raises(ValueError, match=r"pack_bytes must be an int >= 0 \(0: no packing\), got 1.5"):
        CollectiveAllReduceTrainer(pack_bytes=1.5)


@pytest.mark.timeout(150)
def test_a_long_run_does_not_pile_up_threads(tmp_path):
    """240 steps of 2 collectives (pack_bytes=0) with timeout_s: a timeout on each collective op made
    TensorFlow start a thread per execution sleeping for the whole timeout (480 threads here; long
    runs aborted with "Resource temporarily unavailable")."""
    proc, out = _run(tmp_path, 2, "--epochs", "40", "--pack-bytes", "0", "--timeout", "600")
    assert proc.returncode == 0, proc.stderr[-3000:]
    for r in range(2):
        first, last = map(int, (out / f"threads.{r}").read_text().split())
        assert last - first < 100, f"rank {r}: {first} threads after the first step, {last} at the end"
