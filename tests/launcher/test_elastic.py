"""Elastic jobs (``--nnodes MIN:MAX``): real launchers, one per node, on loopback addresses; a rank script
counts steps in rank 0 and resumes from its checkpoint, so each test sees whether work was lost."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from support.launcher_run import LAUNCH, assert_job_gone, finish, rank_script, start_launch
from support.netcluster import NetCluster, require_netns
from support.procs import free_port, wait_for
from towerpack.launcher.cli import parse
from towerpack.launcher.errors import UsageError
from towerpack.launcher.membership import NodeRange
from towerpack.launcher.spec import Role

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(60)]
COUNTER = rank_script("elastic_counter.py")
SECRET = {"TOWERPACK_LAUNCH_SECRET": "secret-of-the-elastic-tests"}
LOG = re.compile(r"attempt (\d+) rank (\d+) world (\d+) node (\d+) start (\d+) reason (\w+) prev (\d+)")


def _node(port: int, rank: int | None, nnodes: str, out, steps: int, *args: str, addr: str | None = None):
    where = ["--node-rank", str(rank)] if rank is not None else []
    extra = ["--node-addr", addr] if addr else []
    return start_launch(
        "--nnodes", nnodes, *where, "--master", f"127.0.0.1:{port}", *extra, "--np", "1",
        "--backend", "none", "--heartbeat-timeout", "3", *args, COUNTER, str(out), str(steps), env=SECRET,
    )  # fmt: skip


def _log(out) -> list[tuple[int, int, int, int, int, str, int]]:
    """The ranks' start lines: (attempt, rank, world, node rank, start step, reason, previous world)."""
    text = (out / "log").read_text() if (out / "log").exists() else ""
    return sorted(tuple(v if i == 5 else int(v) for i, v in enumerate(m)) for m in LOG.findall(text))


def _steps(out, attempt: int) -> list[int]:
    path = out / f"steps.{attempt}"
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _kill_all(*procs) -> None:
    for proc in procs:
        proc.kill()
        proc.wait()


def test_node_range_and_roles():
    assert NodeRange.parse("2:4") == NodeRange(2, 4) and NodeRange.parse("3") is None
    for bad, why in (("4:2", "1 <= MIN <= MAX"), ("0:2", "1 <= MIN <= MAX"), ("a:b", "N or MIN:MAX")):
        with pytest.raises(UsageError, match=re.escape(why)):
            parse(["--nnodes", bad, "--master", "127.0.0.1:1", "--np", "1", COUNTER])
    with pytest.raises(UsageError, match="needs --master"):
        parse(["--nnodes", "1:2", "--np", "1", COUNTER])
    with pytest.raises(UsageError, match="--rendezvous-timeout is for elastic jobs"):
        parse(["--nnodes", "2", "--node-rank", "1", "--master", "127.0.0.1:1", "--np", "1",
               "--rendezvous-timeout", "5", COUNTER])  # fmt: skip
    port = free_port()
    spec = parse(["--nnodes", "1:3", "--master", f"127.0.0.1:{port}", "--np", "1", COUNTER], env=SECRET)
    assert (spec.role, spec.elastic, spec.nnodes) == (Role.COORDINATOR, NodeRange(1, 3), 3)
    agent = parse(
        ["--nnodes", "1:3", "--node-rank", "5", "--master", "127.0.0.1:1", "--np", "1", COUNTER], env=SECRET
    )
    assert agent.role is Role.AGENT


def test_a_second_launcher_on_the_master_machine_is_told_to_pass_node_ranks():
    # The same command started twice on one machine: the first holds --master's port as node 0.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(UsageError) as error:
            parse(["--nnodes", "1:2", "--master", f"127.0.0.1:{port}", "--np", "1", COUNTER], env=SECRET)
    message = str(error.value)
    assert f"--master port 127.0.0.1:{port} is already in use" in message
    assert "another launcher on this machine is probably node 0 already" in message
    assert "pass --node-rank 0 to the first launcher and --node-rank 1 (2, ...) to the others" in message


def test_lost_node_job_goes_on_at_the_smaller_size(tmp_path):
    port = free_port()
    node0 = _node(port, 0, "1:2", tmp_path, 60)
    node1 = _node(port, 1, "1:2", tmp_path, 60, addr="127.0.0.2")
    try:
        wait_for(lambda: len(_steps(tmp_path, 0)) >= 10, 30, what="attempt 0 to run on two nodes")
        node1.kill()
        (rc0, _, err0), _ = finish(node0, node1, timeout=40)
        assert rc0 == 0, err0
        log = _log(tmp_path)
        assert [x[:4] for x in log] == [(0, 0, 2, 0), (0, 1, 2, 1), (1, 0, 1, 0)], log
        assert log[0][5:] == ("start", 2) and log[2][5:] == ("membership", 2)
        # Rank 0 checkpointed on SIGUSR1: the new attempt starts where the old one stopped, and counts on.
        assert log[2][4] == _steps(tmp_path, 0)[-1] and _steps(tmp_path, 1)[-1] == 60
        assert re.search(
            r"membership changes:\n    \S+ node 1 \(127\.0\.0\.2\) left "
            r"\(lost: its launcher's connection closed[^)]*\); world size 2 -> 1",
            err0,
        ), err0
        assert "attempt 1 (membership): 1 node(s), world size 1" in err0
        assert_job_gone(timeout=5.0)
    finally:
        _kill_all(node0, node1)


def test_node_joining_mid_run_grows_the_world_without_losing_work(tmp_path):
    port = free_port()
    node0 = _node(port, 0, "1:2", tmp_path, 80)
    node1 = None
    try:
        wait_for(lambda: len(_steps(tmp_path, 0)) >= 5, 30, what="attempt 0 to run on node 0")
        node1 = _node(port, 1, "1:2", tmp_path, 80, addr="127.0.0.2")
        (rc0, _, err0), (rc1, _, err1) = finish(node0, node1, timeout=40)
        assert (rc0, rc1) == (0, 0), err0 + err1
        log = _log(tmp_path)
        assert [x[:4] for x in log] == [(0, 0, 1, 0), (1, 0, 2, 0), (1, 1, 2, 1)], log
        assert [x[5:] for x in log[1:]] == [("membership", 1)] * 2
        # The ranks checkpointed at the step they reached: the larger world goes on from there.
        assert log[1][4] == _steps(tmp_path, 0)[-1] > 0 and _steps(tmp_path, 1)[-1] == 80
        assert re.search(
            r"membership changes:\n    \S+ node 1 \(127\.0\.0\.2\) joined; world size 1 -> 2", err0
        ), err0
        assert_job_gone(timeout=5.0)
    finally:
        _kill_all(node0, *([node1] if node1 else []))


def test_below_min_fails_naming_the_lost_node(tmp_path):
    port = free_port()
    errors = tmp_path / "error.json"
    node0 = _node(port, 0, "2:2", tmp_path, 1000, "--rendezvous-timeout", "3", "--error-file", str(errors))
    node1 = _node(port, 1, "2:2", tmp_path, 1000, addr="127.0.0.2")
    try:
        wait_for(lambda: len(_steps(tmp_path, 0)) >= 5, 30, what="attempt 0 to run on two nodes")
        node1.kill()
        lost = time.monotonic()
        (rc0, _, err0), _ = finish(node0, node1, timeout=40)
        assert time.monotonic() - lost < 20
        assert rc0 == 1, err0
        assert "node 1 (127.0.0.2) failed first (its launcher's connection closed" in err0
        assert "fewer than 2 node(s) for 3 s (--rendezvous-timeout) after losing node 1 (127.0.0.2)" in err0
        report = json.loads(errors.read_text())
        assert report["state"] == "failed" and report["root_cause"]["node"] == 1
        (change,) = report["membership_changes"]
        assert {k: change[k] for k in ("node", "host", "reason", "old_world_size", "new_world_size")} == {
            "node": 1, "host": "127.0.0.2", "reason": "lost", "old_world_size": 2, "new_world_size": 1,
        }  # fmt: skip
        assert_job_gone(timeout=5.0)
    finally:
        _kill_all(node0, node1)


def test_losing_node_0_of_two_ends_the_job_for_want_of_a_quorum(tmp_path):
    """Node 1 cannot tell node 0's death from a partition that left node 0 running the job: it must not
    take over (see test_elastic_failover for three nodes, where the majority does)."""
    port = free_port()
    errors = tmp_path / "error.json"
    node0 = _node(port, 0, "1:2", tmp_path, 1000)
    node1 = _node(port, 1, "1:2", tmp_path, 1000, "--error-file", str(errors), addr="127.0.0.2")
    try:
        wait_for(lambda: len(_log(tmp_path)) == 2, 30, what="both ranks to start")
        node0.kill()
        lost = time.monotonic()
        (rc1, _, err1), _ = finish(node1, node0, timeout=30)
        assert rc1 == 1 and time.monotonic() - lost < 10, err1
        assert "lost contact with node 0 at 127.0.0.1:" in err1, err1
        assert (
            "node 1 (127.0.0.2) cannot take over: no quorum: 1 of the 2 nodes of the last membership, half "
            "of them without its coordinator (node 0); with 2 nodes a lost coordinator cannot be told from "
            "a network partition, so the job ends"
        ) in err1, err1
        report = json.loads(errors.read_text())
        assert report["state"] == "failed" and report["root_cause"]["node"] == 0
        assert [x[:4] for x in _log(tmp_path)] == [(0, 0, 2, 0), (0, 1, 2, 1)]  # no attempt 1 anywhere
        assert_job_gone(timeout=5.0)
    finally:
        _kill_all(node0, node1)


def test_nodes_of_another_job_shape_or_beyond_max_are_refused(tmp_path):
    port = free_port()
    node0 = _node(port, 0, "1:1", tmp_path, 1000)
    try:
        wait_for(lambda: len(_log(tmp_path)) == 1, 30, what="node 0's rank to start")
        other = _node(port, 1, "1:3", tmp_path, 1000, addr="127.0.0.2")
        extra = _node(port, 1, "1:1", tmp_path, 1000, addr="127.0.0.3")
        (rc, _, err), (rc_extra, _, err_extra) = finish(other, extra, timeout=30)
        assert rc == 2 and "node 0 runs --nnodes 1:1 --ps 0 --backend none, this node --nnodes 1:3" in err, (
            err
        )
        assert rc_extra == 2 and "the job already runs on its maximum of 1 node(s)" in err_extra, err_extra
        node0.send_signal(signal.SIGTERM)
        ((rc0, _, err0),) = finish(node0, timeout=30)
        assert rc0 == 128 + signal.SIGTERM, err0
        assert "membership change" not in err0 and _log(tmp_path)[-1][:3] == (0, 0, 1)
    finally:
        _kill_all(node0)


def test_link_cut_then_the_node_comes_back(tmp_path):
    """Network namespaces: node 1's link is cut (silent, not closed), the job goes on alone; once healed,
    a new launcher on node 1 joins and the world grows again. No --node-rank: roles follow --master."""
    require_netns()
    port = free_port()
    with NetCluster(2) as net:
        master = f"{net.nodes[0].addr}:{port}"

        def start(i: int) -> subprocess.Popen:
            argv = [*LAUNCH, "--nnodes", "1:2", "--master", master, "--np", "1", "--backend", "none",
                    "--heartbeat-timeout", "3", COUNTER, str(tmp_path), "150"]  # fmt: skip
            return net.popen(i, argv, env=dict(os.environ, **SECRET), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip

        node0, node1 = start(0), start(1)
        wait_for(lambda: len(_log(tmp_path)) == 2 and len(_steps(tmp_path, 0)) >= 5, 30, what="two nodes")
        net.cut(1)
        ((rc1, _, err1),) = finish(node1, timeout=30)
        # Cut off, node 1 cannot take over (half of the nodes, without the coordinator): node 0 goes on.
        assert rc1 == 1 and "lost contact with node 0" in err1 and "cannot take over: no quorum" in err1, err1
        wait_for(lambda: len(_steps(tmp_path, 1)) >= 5, 30, what="attempt 1 on node 0 alone")
        net.heal(1)
        again = start(1)
        (rc0, _, err0), (rc2, _, err2) = finish(node0, again, timeout=40)
        assert (rc0, rc2) == (0, 0), err0 + err2
    log = _log(tmp_path)
    assert [x[:4] for x in log] == [
        (0, 0, 2, 0), (0, 1, 2, 1), (1, 0, 1, 0), (2, 0, 2, 0), (2, 1, 2, 1),
    ], log  # fmt: skip
    assert log[2][4] == _steps(tmp_path, 0)[-1] and log[3][4] == _steps(tmp_path, 1)[-1]
    assert _steps(tmp_path, 2)[-1] == 150
    changes = err0.split("membership changes:\n")[1].splitlines()[:2]
    assert all(line.startswith("    ") for line in changes), err0
    assert re.search(
        r"node 1 \(10\.200\.0\.2\) left \(silent: no heartbeat for 3 s.*world size 2 -> 1", changes[0]
    )
    assert re.search(r"node 2 \(10\.200\.0\.2\) joined; world size 1 -> 2", changes[1])
