"""The CIFAR ResNet example (towerpack's layers, synchronized BatchNorm) in its short mode, with 2
towers in one process and with 2 processes under the real `launch`; its benchmark's quick mode."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.foreign_launchers import clean_env
from support.launcher_run import launch

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "resnet" / "cifar_resnet.py")
BENCH = str(ROOT / "benchmarks" / "models.py")
HOROVODRUN = str(Path(sys.executable).parent / "horovodrun")
SHORT_MODE_ACCURACY = 0.85  # ResNet-8, 5 epochs (about 0.97 is typical)


def check(stdout: str, logdir: Path, sync: str) -> None:
    assert f"synchronized BatchNorm: {sync}" in stdout
    accuracy = float(re.search(r"validation accuracy: ([0-9.]+)", stdout).group(1))
    assert accuracy >= SHORT_MODE_ACCURACY, stdout[-2000:]
    stats = json.loads((logdir / "stats.json").read_text())
    assert [r["epoch_num"] for r in stats if "validation_error" in r] == [1, 2, 3, 4, 5]
    # The checkpoint has the reference's variable names.
    import tensorflow as tf

    names = {n for n, _ in tf.train.list_variables(str(logdir))}
    assert {"conv0/W", "conv0/bn/mean/EMA", "res2.0/conv1/bn/gamma", "bnlast/bn/beta", "linear/W"} <= names
    assert not any(n.startswith("tower1/") for n in names)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_resnet_two_towers_synchronized(tmp_path):
    proc = subprocess.run(
        [sys.executable, EXAMPLE, "--short", "--towers", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=230,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "on 2 tower(s)" in proc.stdout
    check(proc.stdout, tmp_path / "train_log" / "resnet", "nccl")


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.horovod
@pytest.mark.timeout(240)
@pytest.mark.parametrize("launcher", ["launch", "horovodrun"])
def test_resnet_two_processes_synchronized(tmp_path, horovod_required, launcher):
    """The same results and files under launch and under horovodrun (rank 0 writes the log directory)."""
    if launcher == "launch":
        proc = launch("--np", "2", EXAMPLE, "--short", cwd=tmp_path, timeout=230)
    else:
        horovodrun = [
            str(Path(sys.executable).parent / "horovodrun"),
            "-np",
            "2",
            "-H",
            "localhost:2",
            "--gloo",
        ]
        proc = subprocess.run(
            [*horovodrun, sys.executable, EXAMPLE, "--short"],
            cwd=tmp_path,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=230,
        )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "on 2 process(es)" in proc.stdout
    check(proc.stdout, tmp_path / "train_log" / "resnet", "horovod")


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.horovod
@pytest.mark.timeout(240)
def test_models_benchmark_quick_mode(horovod_required):
    proc = subprocess.run(
        [sys.executable, BENCH, "--quick", "--depth", "1"], capture_output=True, text=True, timeout=230
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert [r["case"] for r in results] == ["simple_trainer_vs_raw_loop", "horovod_trainer_vs_raw_horovod"]
    assert all(r["ours"] > 0 and r["baseline"] > 0 and r["goal"] == 0.97 for r in results)
