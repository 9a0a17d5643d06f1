"""TF-server trainers on a real tf.train.Server cluster started by `launch --backend tf-server`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from support.dist_models import train_reference
from support.launcher_run import launch, wait_ready
from support.procs import free_port

pytestmark = [pytest.mark.multiprocess]

SCRIPT = str(Path(__file__).parent / "scripts" / "tf_train.py")
BATCH = 8
TOL = 1e-9  # float64; only the summation order of the averaged gradients differs


def _load(folder: Path, rank: int) -> dict[str, np.ndarray]:
    with np.load(folder / f"vars.{rank}.npz") as f:
        return {k.replace("__", "/"): f[k] for k in f.files}


@pytest.mark.parametrize(
    ("mode", "workers", "ps"), [("replicated", 2, 1), ("ps", 2, 1), ("replicated", 3, 2)], ids=str
)
def test_matches_simple_trainer_and_ps_exit(tmp_path, mode, workers, ps):
    args = ["--backend", "tf-server", "--np", str(workers), "--ps", str(ps)]
    proc = launch(*args, SCRIPT, str(tmp_path), "--mode", mode, timeout=150)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Each parameter server left on its own once every worker was done.
    for i in range(ps):
        assert f"Parameter server {i}: every worker has finished" in proc.stderr
    expected = train_reference(batch=workers * BATCH, epochs=2)
    for r in range(workers):
        got = _load(tmp_path, r)
        for name in ("w", "b"):
            np.testing.assert_allclose(got[name], expected[name], atol=TOL, err_msg=f"worker {r} {name}")
            if mode == "replicated":
                np.testing.assert_allclose(got[f"global/{name}"], expected[name], atol=TOL)
        # Worker-local variables (a callback's starts at 1000 x rank) started from the chief's.
        assert got["global_step"] == got["steps_seen"] == expected["global_step"], f"worker {r}"


@pytest.mark.parametrize("rank", [0, 1], ids=["chief", "worker"])
def test_stop_training_in_one_worker_ends_every_worker_at_the_same_step(tmp_path, rank):
    """StopTraining in one worker (any) ends the job cleanly: before, the others waited forever
    for its gradients in the next synchronous step."""
    args = ["--backend", "tf-server", "--np", "3", "--ps", "1"]
    proc = launch(*args, SCRIPT, str(tmp_path), "--epochs", "100", "--stop-rank", str(rank), timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Parameter server 0: every worker has finished" in proc.stderr
    assert proc.stderr.count("stops at global_step 3: another worker has ended training") == 2, proc.stderr[
        -3000:
    ]
    got = [_load(tmp_path, r) for r in range(3)]
    for r in range(3):
        assert got[r]["global_step"] == 3, f"worker {r}"
        for name in ("w", "b"):
            np.testing.assert_array_equal(got[r][name], got[0][f"global/{name}"], err_msg=f"worker {r}")


def test_killed_worker_ends_the_job(tmp_path):
    args = ["--backend", "tf-server", "--np", "2", "--ps", "1"]
    proc = launch(*args, SCRIPT, str(tmp_path), "--epochs", "100", "--die-rank", "1", timeout=120)
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert not list(tmp_path.glob("vars.*"))


@pytest.mark.timeout(150)
def test_parameter_server_ends_the_job_when_a_worker_dies_outside_launch(tmp_path):
    """Tasks started by hand with TF_CONFIG (as under Slurm), no launcher watching them: a worker
    SIGKILLed right after its first step (before a periodic heartbeat) leaves no "finished" token;
    the parameter server exits non-zero once the worker has been silent for worker_timeout, and
    the chief blocked on it ends as well."""
    timeout = 6.0
    spec = {"worker": [f"127.0.0.1:{free_port()}" for _ in range(2)], "ps": [f"127.0.0.1:{free_port()}"]}
    tasks = {"ps": ("ps", 0), "chief": ("worker", 0), "worker1": ("worker", 1)}
    args = [sys.executable, SCRIPT, str(tmp_path), "--epochs", "1000", "--hang-rank", "1"]
    procs, logs = {}, {}
    try:
        for name, (job, index) in tasks.items():
            config = json.dumps({"cluster": spec, "task": {"type": job, "index": index}})
            logs[name] = tmp_path / f"{name}.log"
            with logs[name].open("w") as log:
                procs[name] = subprocess.Popen(
                    [*args, "--worker-timeout", str(timeout)],
                    env=dict(os.environ, TF_CONFIG=config),
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                )
        pid = wait_ready(tmp_path, 1, timeout=90)["1"]
        assert pid == procs["worker1"].pid
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        try:
            ps_status = procs["ps"].wait(timeout=timeout + 30)
            ps_took = time.monotonic() - killed
            chief_status = procs["chief"].wait(timeout=30)
        except subprocess.TimeoutExpired as e:
            logged = "\n".join(f"--- {n}:\n{f.read_text()[-3000:]}" for n, f in logs.items())
            pytest.fail(f"{e}\n{logged}")
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()
    ps_log, chief_log = logs["ps"].read_text(), logs["chief"].read_text()
    assert ps_status == 1, ps_log[-3000:]
    assert "worker(s) [1] did not finish and sent no heartbeat for 6 s" in ps_log
    # Counted from its last heartbeat, at most one heartbeat interval (1.5 s) before the kill.
    assert timeout - 2 <= ps_took < timeout + 20
    assert chief_status != 0, chief_log[-3000:]
    assert not list(tmp_path.glob("vars.*"))


def test_resume_from_the_chief_checkpoint(tmp_path):
    args = ["--backend", "tf-server", "--np", "2", "--ps", "1", SCRIPT, str(tmp_path), "--mode", "replicated"]
    logdir = tmp_path / "logs"
    proc = launch(*args, "--epochs", "2", "--logdir", str(logdir), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (logdir / "checkpoint").exists()
    for old in tmp_path.glob("vars.*"):
        old.unlink()
    proc = launch(*args, "--epochs", "3", "--logdir", str(logdir), timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Resuming from" in proc.stderr
    expected = train_reference(batch=2 * BATCH, epochs=3)
    for r in range(2):
        got = _load(tmp_path, r)
        for name in ("w", "b", "global/w"):
            np.testing.assert_allclose(got[name], expected[name.split("/")[-1]], atol=TOL)
        # The non-chief continues the restored global step and non-trainable variable too.
        assert got["global_step"] == got["steps_seen"] == expected["global_step"] == 18, f"worker {r}"


@pytest.mark.timeout(150)
def test_a_stop_signal_to_every_task_started_by_hand_checkpoints_and_ends_cleanly(tmp_path):
    """A scheduler that signals every task of the job at once (srun, Kubernetes): the parameter
    server keeps serving until the workers have stopped after the same step and the chief has
    saved its checkpoint; then every task exits 0 and the same command would resume there."""
    script = str(Path(__file__).resolve().parents[2] / "launcher" / "ranks" / "preempt_train.py")
    spec = {"worker": [f"127.0.0.1:{free_port()}" for _ in range(2)], "ps": [f"127.0.0.1:{free_port()}"]}
    tasks = {"ps": ("ps", 0), "chief": ("worker", 0), "worker1": ("worker", 1)}
    logdir = tmp_path / "logs"
    logdir.mkdir()
    procs, logs = {}, {}
    try:
        for name, (job, index) in tasks.items():
            config = json.dumps({"cluster": spec, "task": {"type": job, "index": index}})
            logs[name] = tmp_path / f"{name}.log"
            with logs[name].open("w") as log:
                procs[name] = subprocess.Popen(
                    [sys.executable, script, str(logdir), "tf-server"],
                    env=dict(os.environ, TF_CONFIG=config),
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                )
        deadline = time.monotonic() + 90
        while not (logdir / "ready").exists():
            assert time.monotonic() < deadline, "the chief never reached its ready step"
            assert all(p.poll() is None for p in procs.values()), "a task ended early"
            time.sleep(0.05)
        for p in procs.values():
            p.send_signal(signal.SIGUSR1)
        try:
            status = {name: p.wait(timeout=60) for name, p in procs.items()}
        except subprocess.TimeoutExpired as e:
            logged = "\n".join(f"--- {n}:\n{f.read_text()[-3000:]}" for n, f in logs.items())
            pytest.fail(f"{e}\n{logged}")
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()
    assert status == {"ps": 0, "chief": 0, "worker1": 0}, {n: f.read_text()[-2000:] for n, f in logs.items()}
    assert (
        "Parameter server 0 received SIGUSR1: it serves until every worker has finished"
        in logs["ps"].read_text()
    )
    ends = {(logdir / f"steps.{r}").read_text().split()[-1] for r in range(2)}
    assert len(ends) == 1  # both workers stopped after the same step ...
    (step,) = ends
    assert int(step) < 15  # ... before the end of training (3 epochs of 5 steps)
    assert (logdir / f"model-{step}.index").exists()  # ... and the chief saved there
