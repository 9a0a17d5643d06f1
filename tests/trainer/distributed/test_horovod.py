"""HorovodTrainer across real processes started by the real `launch` (Gloo on loopback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from support.dist_models import regression_data, train_reference
from support.launcher_run import assert_job_gone, launch, start_launch
from support.procs import free_port, run_python, terminate_tree, wait_for

pytestmark = [pytest.mark.multiprocess, pytest.mark.horovod, pytest.mark.usefixtures("horovod_required")]

SCRIPT = str(Path(__file__).parent / "scripts" / "hvd_train.py")
BATCH = 8
# Float64 everywhere; the all-reduce only changes the summation order of the gradients.
TOL = 1e-9


def _load(out: Path, rank: int) -> dict[str, np.ndarray]:
    with np.load(out / f"vars.{rank}.npz") as f:
        return {k.replace("__", "/"): f[k] for k in f.files}


def _run(tmp_path, np_, *args, timeout=120):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    proc = launch("--np", str(np_), "--backend", "horovod", SCRIPT, str(out), *args, timeout=timeout)
    return proc, out


@pytest.mark.parametrize("ranks", [2, 3])
def test_matches_simple_trainer_at_total_batch(tmp_path, ranks):
    proc, out = _run(tmp_path, ranks, "--epochs", "2", "--batch", str(BATCH))
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = train_reference(batch=ranks * BATCH, epochs=2)
    results = [_load(out, r) for r in range(ranks)]
    for r, got in enumerate(results):
        for name in ("w", "b"):
            np.testing.assert_allclose(
                got[name], expected[name], rtol=0, atol=TOL, err_msg=f"rank {r} {name}"
            )
        # Created by a callback with the value RANK on each rank: the broadcast gave it rank 0's.
        assert got["callback_var"] == 0.0
        assert got["global_step"] == expected["global_step"] == 2 * (96 // (ranks * BATCH))
    # Distributed evaluation: the 5 validation batches split unevenly over the ranks, reduced to
    # the mean squared error over the whole validation set, on every rank.
    vx, vy = regression_data(40, seed=5)
    mse = float(np.mean((vx @ expected["w"] + expected["b"] - vy) ** 2))
    for r in range(ranks):
        got = json.loads((out / f"eval.{r}.json").read_text())
        assert got == pytest.approx({"validation_cost": mse}, rel=1e-9)
    # Chief-only callbacks run on rank 0 only.
    assert sorted(p.name for p in out.glob("chief.*")) == ["chief.0"]


def test_distributed_inference_with_ranks_that_have_no_batches(tmp_path):
    """2 validation batches over 3 ranks: the chief (rank 0) has none, the others one each."""
    proc, out = _run(tmp_path, 3, "--epochs", "1", "--batch", str(BATCH), "--val-batches", "2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = train_reference(batch=3 * BATCH, epochs=1)
    vx, vy = (a[:16] for a in regression_data(40, seed=5))
    mse = float(np.mean((vx @ expected["w"] + expected["b"] - vy) ** 2))
    for r in range(3):
        got = json.loads((out / f"eval.{r}.json").read_text())
        assert got == pytest.approx({"validation_cost": mse}, rel=1e-9), f"rank {r}"


def test_killed_rank_ends_the_job(tmp_path):
    proc, out = _run(tmp_path, 2, "--epochs", "50", "--die-rank", "1", timeout=90)
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert not list(out.glob("vars.*"))


def test_stop_training_in_one_rank_fails_the_others_with_an_explanation(tmp_path):
    """Horovod cannot tell a rank that finished from one that failed: the others fail, saying so."""
    proc, out = _run(tmp_path, 2, "--epochs", "50", "--stop-rank", "1", timeout=90)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Rank 0: another rank has left Horovod. Either it ended training early" in proc.stderr
    assert (out / "vars.1.npz").exists() and not (out / "vars.0.npz").exists()


def test_resume_from_the_chief_checkpoint(tmp_path):
    logdir = tmp_path / "logs"
    proc, out = _run(tmp_path, 2, "--epochs", "2", "--logdir", str(logdir))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (logdir / "checkpoint").exists()
    (out / "vars.0.npz").unlink()
    (out / "vars.1.npz").unlink()
    proc, out = _run(tmp_path, 2, "--epochs", "3", "--logdir", str(logdir))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Resuming from" in proc.stderr
    # Two epochs, a restart from the checkpoint, one more epoch == three epochs in one go.
    expected = train_reference(batch=2 * BATCH, epochs=3)
    for r in range(2):
        got = _load(out, r)
        for name in ("w", "b", "w/Momentum", "global_step"):
            np.testing.assert_allclose(
                got[name], expected[name], rtol=0, atol=TOL, err_msg=f"rank {r} {name}"
            )


def test_one_shared_dataflow_server_gives_each_datapoint_to_one_rank(tmp_path):
    scripts = Path(__file__).parent / "scripts"
    address = f"tcp://127.0.0.1:{free_port()}"
    dataflow = Path(sys.executable).parent / "dataflow"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(scripts), os.environ.get("PYTHONPATH", "")]))
    log = tmp_path / "serve.log"
    with log.open("w") as f:
        server = subprocess.Popen(
            [str(dataflow), "serve", "counting_data:make_df", "--bind", address],
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: "serving on" in log.read_text() or server.poll() is not None, 30, what="server")
        assert server.poll() is None, log.read_text()
        job = start_launch("--np", "2", str(scripts / "hvd_zmq.py"), str(tmp_path), address)
        try:
            _, stderr = job.communicate(timeout=90)
        finally:
            terminate_tree(job.pid)
            job.wait(timeout=10)
    finally:
        terminate_tree(server.pid)
        server.wait(timeout=10)
    assert_job_gone()
    assert job.returncode == 0, stderr[-3000:]
    ids = [np.load(tmp_path / f"ids.{r}.npy") for r in range(2)]
    assert all(len(a) == 10 * 8 for a in ids)  # 10 steps of one 8-row batch each
    assert len(np.unique(np.concatenate(ids))) == 160  # no datapoint went to both ranks


EMPTY_VALIDATION = """
import json, sys
sys.path.insert(0, sys.argv[1])
from support.dist_models import RankSlices, Regression64, regression_data
from towerpack.trainer import (Callback, DistributedInferenceRunner, HorovodTrainer, ScalarStats,
                               TrainConfig, launch_train_with_config)

class FirstPassOnly:
    '''Validation data with one batch in the first pass and none after (size unknown).'''
    def __init__(self):
        self.passes = 0
    def reset_state(self):
        pass
    def __len__(self):
        raise NotImplementedError
    def __iter__(self):
        self.passes += 1
        if self.passes == 1:
            x, y = regression_data(8, seed=5)
            yield [x, y]

class Record(Callback):
    _chief_only = False
    def __init__(self, runner, out):
        self.runner, self.out = runner, out
    def _trigger_epoch(self):
        self.out.append(dict(self.runner.last_results))

x, y = regression_data()
runner, seen = DistributedInferenceRunner(FirstPassOnly(), ScalarStats("cost")), []
config = TrainConfig(model=Regression64(), dataflow=RankSlices(x, y, 8), monitors=[], extra_callbacks=[],
                     callbacks=[runner, Record(runner, seen)], max_epoch=2, steps_per_epoch=2)
launch_train_with_config(config, HorovodTrainer())
print("SEEN " + json.dumps(seen))
"""


def test_distributed_inference_without_batches_says_so_and_keeps_no_stale_results():
    tests = str(Path(__file__).resolve().parents[2])
    proc = run_python(EMPTY_VALIDATION, tests, timeout=90)
    seen = json.loads(proc.stdout.split("SEEN ", 1)[1])
    assert list(seen[0]) == ["validation_cost"] and seen[1] == {}
    assert "no rank evaluated any batch" in proc.stderr
