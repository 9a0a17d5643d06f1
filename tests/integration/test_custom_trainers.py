"""The GAN and custom-trainer examples in their short modes (real training in a subprocess)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(script: str, *args: str, cwd: Path) -> str:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--short", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "args", [[], ["--separate", "--d-period", "2"]], ids=["GANTrainer", "SeparateGANTrainer"]
)
def test_gan_generator_moves_to_the_data(tmp_path, args):
    out = run_example("gan/gan.py", *args, cwd=tmp_path)
    # The generator starts around (0, 0), 2.24 away from the real mean (2, -1).
    distance = float(re.search(r"distance of means: ([0-9.]+)", out).group(1))
    assert distance < 1.0, out
    logdir = tmp_path / "train_log" / ("gan-separate" if args else "gan")
    # 4 epochs x 300 steps; a global step is a hooked run: GANTrainer runs one per step,
    # SeparateGANTrainer with --d-period 2 runs G every step and D every second step.
    last = 1800 if args else 1200
    pointer = (logdir / "checkpoint").read_text()
    assert re.search(r'^model_checkpoint_path: "model-(\d+)"', pointer, re.M).group(1) == str(last), pointer


def _learned(out: str):
    m = re.search(r"learned w \[([^\]]+)\] b ([-0-9.]+) \|w\| ([0-9.]+)", out)
    return [float(v) for v in m.group(1).split(",")], float(m.group(2)), float(m.group(3))


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_custom_trainer_both_styles(tmp_path):
    w, b, _ = _learned(run_example("custom_trainer/custom_trainer.py", "--style", "train_op", cwd=tmp_path))
    assert max(abs(a - t) for a, t in zip(w, [1.5, -2.0, 0.5], strict=True)) < 0.15
    assert abs(b - 0.3) < 0.1
    # run_step: the projection keeps |w| at the bound (the unconstrained solution has |w| = 2.55).
    out = run_example(
        "custom_trainer/custom_trainer.py", "--style", "run_step", "--max-norm", "1.5", cwd=tmp_path
    )
    assert abs(_learned(out)[2] - 1.5) < 1e-3, out
    assert (tmp_path / "train_log" / "custom-run_step" / "checkpoint").exists()
