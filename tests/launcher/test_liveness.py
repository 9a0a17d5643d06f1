"""Liveness between node launchers: heartbeats both ways; a frozen node (every process group of its
launcher's tree stopped with SIGSTOP, as a hung or powered-off host looks) ends the job, named as the
root cause; a node whose coordinator froze stops its own processes."""

from __future__ import annotations

import json
import time

import pytest

from support.launcher_run import (
    assert_job_gone,
    finish,
    freeze,
    process_tree,
    rank_script,
    start_launch,
    thaw,
    wait_ready,
)
from support.procs import free_port

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(90)]
BEHAVE = rank_script("behave.py")
SECRET = {"TOWERPACK_LAUNCH_SECRET": "secret-of-the-liveness-tests"}


def _node(rank: int, port: int, *args: str):
    addr = ["--node-addr", "127.0.0.2"] if rank else []
    return start_launch(
        "--nnodes", "2", "--node-rank", str(rank), "--master", f"127.0.0.1:{port}", *addr, *args,
        env=SECRET, new_session=True,  # its own process group, so that it can be frozen alone
    )  # fmt: skip


def test_a_frozen_node_ends_the_job_and_is_named_before_the_failures_it_caused(tmp_path):
    # Node 1 freezes; node 0's rank fails a moment later "because of it". With the default timeout the
    # silent node is found, and the summary names it first, the rank's failure after it.
    port, errors = free_port(), tmp_path / "error.json"
    node0 = _node(
        0,
        port,
        "--np",
        "1",
        "--backend",
        "none",
        "--error-file",
        str(errors),
        BEHAVE,
        str(tmp_path),
        "await5",
    )
    node1 = _node(1, port, "--np", "1", BEHAVE, str(tmp_path), "sleep")
    groups = set()
    try:
        wait_ready(tmp_path, 2)
        groups = freeze(node1.pid)
        frozen = time.monotonic()
        time.sleep(1.0)
        (tmp_path / "go").write_text("")
        ((rc0, _, err0),) = finish(node0, timeout=60)
        ended = time.monotonic() - frozen
        assert rc0 == 1, err0
        lines = [line for line in err0.splitlines() if line.startswith("launch: ")]
        assert lines[-2] == (
            "launch: node 1 (127.0.0.2) failed first (no heartbeat for 10 s: its host, launcher or network "
            "stopped); stopped the other 1 process(es)"
        ), err0
        assert (
            lines[-1]
            == "launch: after that, before the job was stopped: rank 0 on host 127.0.0.1 (exit code 5)"
        )
        report = json.loads(errors.read_text())
        assert (report["root_cause"]["kind"], report["root_cause"]["node"]) == ("node lost", 1)
        assert [(f["rank"], f["exit_code"]) for f in report["other_failures"]] == [("0", 5)]
        assert ended < 30.0, ended  # about the heartbeat timeout after the freeze
        # Thawed, node 1 finds its coordinator gone and stops its rank.
        thaw(groups)
        ((rc1, _, err1),) = finish(node1, timeout=30)
        assert rc1 == 1 and "lost contact with node 0" in err1, err1
        assert_job_gone(timeout=5.0)
    finally:
        thaw(groups)
        for proc in (node0, node1):
            proc.kill()
            proc.wait()


def test_a_node_whose_coordinator_froze_stops_its_processes(tmp_path):
    port = free_port()
    node0 = _node(
        0, port, "--np", "1", "--backend", "none", "--heartbeat-timeout", "3", BEHAVE, str(tmp_path), "sleep"
    )
    node1 = _node(1, port, "--np", "1", BEHAVE, str(tmp_path), "child")
    groups = set()
    try:
        wait_ready(tmp_path, 2)
        node0_pids = tuple(p.pid for p in process_tree(node0.pid))
        groups = freeze(node0.pid)
        ((rc1, _, err1),) = finish(node1, timeout=30)  # node 0's --heartbeat-timeout applies to the job
        assert rc1 == 1, err1
        assert "lost contact with node 0 at 127.0.0.1:" in err1 and "no heartbeat for 3 s" in err1
        assert_job_gone(timeout=5.0, exclude=node0_pids)  # node 1's rank and its setsid child
        thaw(groups)
        ((rc0, _, err0),) = finish(node0, timeout=30)
        assert rc0 == 1 and "node 1 (127.0.0.2) failed first" in err0, err0
        assert_job_gone(timeout=5.0)
    finally:
        thaw(groups)
        for proc in (node0, node1):
            proc.kill()
            proc.wait()
