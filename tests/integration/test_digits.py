"""The digits example in its short mode: one process, and two processes under the real `launch`."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.launcher_run import launch

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "digits" / "train.py")
SHORT_MODE_ACCURACY = 0.90  # 3 epochs
DEMO_ACCURACY = 0.95  # the full 8-epoch run that `make demo` starts


def check_outputs(stdout: str, logdir: Path, epochs: int = 3, min_accuracy: float = SHORT_MODE_ACCURACY):
    accuracy = float(re.search(r"validation accuracy: ([0-9.]+)", stdout).group(1))
    assert accuracy >= min_accuracy, stdout[-2000:]
    stats = json.loads((logdir / "stats.json").read_text())
    assert [r["epoch_num"] for r in stats if "validation_error" in r] == list(range(1, epochs + 1))
    assert abs(1 - stats[-1]["validation_error"] - accuracy) < 1e-4
    assert (logdir / "checkpoint").exists()
    assert list(logdir.glob("model-*.index")), "no checkpoint written"
    assert list(logdir.glob("events.out.tfevents.*")), "no TensorBoard events file"
    png = logdir / "training_curves.png"
    assert png.read_bytes().startswith(b"\x89PNG")
    for what in ("checkpoint: ", "training curves: ", "logs "):
        assert what in stdout


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_digits_single_process(tmp_path):
    proc = subprocess.run(
        [sys.executable, EXAMPLE, "--short"], cwd=tmp_path, capture_output=True, text=True, timeout=140
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_outputs(proc.stdout, tmp_path / "train_log" / "digits")


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_digits_two_towers_in_one_process(tmp_path):
    proc = subprocess.run(
        [sys.executable, EXAMPLE, "--short", "--towers", "2", "--name", "towers"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=140,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "on 2 tower(s)" in proc.stdout
    assert "Building 2 training towers on /cpu:0, /cpu:1" in proc.stderr
    check_outputs(proc.stdout, tmp_path / "train_log" / "towers")


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.horovod
@pytest.mark.timeout(240)
def test_the_demo_two_processes_full_length(tmp_path, horovod_required):
    # What `make demo` runs on a machine without GPUs, with its default arguments.
    proc = launch("--np", "2", EXAMPLE, cwd=tmp_path, timeout=230)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Trained the digits convnet on 2 process(es) for 8 epochs" in proc.stdout
    check_outputs(proc.stdout, tmp_path / "train_log" / "digits", epochs=8, min_accuracy=DEMO_ACCURACY)
    # Only rank 0 writes logs.
    assert sorted(p.name for p in (tmp_path / "train_log").iterdir()) == ["digits"]
