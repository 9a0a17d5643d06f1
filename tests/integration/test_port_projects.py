"""Tensorpack projects of our own, in the styles users wrote them, train after `towerpack port` alone.

Each project in tests/support/port_projects is copied, ported by the command a user runs, checked
(what the tool rewrote, that a second run changes nothing, and what it reports), then trained in a
fresh interpreter: the run must exit 0 and leave a checkpoint and the statistics its callbacks write.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]

PROJECTS = Path(__file__).parents[1] / "support" / "port_projects"
TOWERPACK = str(Path(sys.executable).with_name("towerpack"))


def port(project: str, tmp_path: Path) -> tuple[Path, subprocess.CompletedProcess]:
    copy = tmp_path / project
    shutil.copytree(PROJECTS / project, copy)
    done = subprocess.run([TOWERPACK, "port", str(copy)], capture_output=True, text=True, timeout=180)
    again = subprocess.run(
        [TOWERPACK, "port", "--check", str(copy)], capture_output=True, text=True, timeout=180
    )
    assert again.returncode == 0, f"a second run would change files:\n{again.stdout}"
    return copy, done


def train(copy: Path, logdir: Path) -> subprocess.CompletedProcess:
    run = subprocess.run(
        [sys.executable, "train.py", "--logdir", str(logdir)],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    assert list(logdir.glob("model-*.index")), "no checkpoint was written"
    return run


def last_stats(logdir: Path) -> dict:
    return json.loads((logdir / "stats.json").read_text())[-1]


@pytest.mark.timeout(400)
def test_old_style_project_trains_after_port(tmp_path):
    copy, done = port("old_style", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "need a person" not in done.stdout, done.stdout
    text = (copy / "train.py").read_text() + (copy / "data.py").read_text()
    for gone in ("tensorpack", "tf.contrib", "np.int(", "np.float)", "np.bool"):
        assert gone not in text.replace("towerpack", ""), gone

    logdir = tmp_path / "log"
    run = train(copy, logdir)
    assert "done bool" in run.stdout
    stats = last_stats(logdir)
    assert stats["epoch_num"] == 3
    assert stats["learning_rate"] == pytest.approx(0.02)  # get_scalar_var's summary, set by the callback
    assert stats["train_error"] < 0.5  # four classes: chance is 0.75


@pytest.mark.timeout(400)
def test_slim_style_project_trains_after_port(tmp_path):
    copy, done = port("slim_style", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "need a person" not in done.stdout, done.stdout
    text = (copy / "train.py").read_text()
    assert "tf.contrib" not in text and "tensorpack" not in text.replace("towerpack", "")

    logdir = tmp_path / "log"
    train(copy, logdir)
    stats = last_stats(logdir)
    assert stats["epoch_num"] == 3
    assert stats["total_cost"] < 1.0  # ln 4 = 1.39 at chance
