"""The data-server example: a real `dataflow serve` process feeding 2 launched training ranks."""

import re
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from support.launcher_run import LAUNCH, assert_job_gone
from support.procs import free_port, terminate_tree

FOLDER = Path(__file__).resolve().parents[2] / "examples" / "data_server"
SERVE = [sys.executable, "-m", "towerpack.dataflow.cli", "serve"]


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.horovod
@pytest.mark.timeout(150)
def test_data_server_feeds_two_ranks(tmp_path, horovod_required):
    addr = f"tcp://127.0.0.1:{free_port()}"
    server = subprocess.Popen(
        [*SERVE, "data:make_train_df", "--bind", addr, "--workers", "1"],
        cwd=FOLDER,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        for line in server.stdout:  # wait until it listens
            if "serving on" in line:
                break
        proc = subprocess.run(
            [*LAUNCH, "--np", "2", str(FOLDER / "trainer.py"), "--addr", addr, "--short"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        server_tree = [*psutil.Process(server.pid).children(recursive=True), psutil.Process(server.pid)]
        assert_job_gone(timeout=2.0, exclude=tuple(p.pid for p in server_tree))  # only the server is left
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        errors = [float(v) for v in re.findall(r"validation_error: ([0-9.e-]+)", proc.stdout + proc.stderr)]
        assert len(errors) == 3 and errors[-1] < 0.10, proc.stdout[-3000:]
        logdir = tmp_path / "train_log" / "data_server"
        assert (logdir / "stats.json").exists() and (logdir / "checkpoint").exists()
    finally:
        server.send_signal(signal.SIGINT)  # Ctrl-C, how a user stops the server
        try:
            out, _ = server.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            terminate_tree(server.pid)
            out, _ = server.communicate(timeout=10)
    assert "consumers connected: 2" in out
