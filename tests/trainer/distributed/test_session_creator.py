"""get_distributed_session_creator with real tf.train.Servers (a parameter server and two workers,
in one subprocess): the chief initializes, another worker waits for it, then shares its variables."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.procs import free_port

pytestmark = [pytest.mark.multiprocess]

SCRIPT = str(Path(__file__).parent / "scripts" / "session_creator.py")


@pytest.mark.timeout(150)
def test_chief_initializes_and_other_workers_wait_for_it():
    ports = [str(free_port()) for _ in range(3)]
    proc = subprocess.run([sys.executable, SCRIPT, *ports], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    # Before the chief: a worker times out naming what the chief has not initialized.
    assert got["timeout_error"] == (
        "worker 1: the chief (worker 0) did not initialize 1 variable(s) on the parameter servers "
        "within 1 s: w"
    )
    assert 1.0 <= got["timeout_took"] < 10
    # With a longer timeout it waits, and returns once the chief's session exists.
    assert got["worker_waited"] and got["worker_returned_after_chief"]
    assert got["chief"] == {"w": 3.0, "own": 10.0, "local": 1.0}
    # The worker initialized its own and local variables and sees the chief's update of w.
    assert got["worker"] == {"w": 42.0, "own": 11.0, "local": 1.0}
    assert got["ps_error"] == (
        "get_distributed_session_creator runs in a worker task; this server is ps:0 "
        "(a parameter server serves with server.join())"
    )
    assert "Worker 1 waits for the chief to initialize 1 variable(s)" in proc.stderr


def test_it_takes_a_server():
    from towerpack.trainer.distributed import get_distributed_session_creator

    with pytest.raises(TypeError, match=r"takes a tf\.train\.Server, got str"):
        get_distributed_session_creator("grpc://127.0.0.1:2222")
