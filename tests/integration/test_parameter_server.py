"""The parameter-server example under the real `launch --backend tf-server --np 2 --ps 1`."""

import json
import re
from pathlib import Path

import pytest

from support.launcher_run import launch

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "parameter_server" / "train.py")


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.timeout(150)
def test_parameter_server_example(tmp_path):
    proc = launch(
        "--backend", "tf-server", "--np", "2", "--ps", "1", EXAMPLE, "--short", cwd=tmp_path, timeout=140
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    errors = [float(v) for v in re.findall(r"\[\w+:0\] .*validation_error: ([0-9.e-]+)", out)]
    assert len(errors) == 2 and errors[-1] < 0.15, out[-3000:]
    logdir = tmp_path / "train_log" / "parameter_server"
    stats = json.loads((logdir / "stats.json").read_text())
    assert [r["epoch_num"] for r in stats if "validation_error" in r] == [1, 2]
    assert list(logdir.glob("model-*.index"))
