"""An elastic job outlives its coordinator: three nodes in network namespaces, node 0 killed or cut off.
The survivors elect the lowest node id among them, restart their ranks at the new size, and a node
cut off alone never runs a job of its own (it has no quorum). Ranks count steps as in test_elastic."""

from __future__ import annotations

import os
import re
import subprocess
import time

import pytest

from launcher.test_elastic import COUNTER, SECRET, _log, _steps
from support.launcher_run import LAUNCH, assert_job_gone, finish
from support.netcluster import NetCluster, require_netns
from support.procs import free_port, wait_for
from towerpack.launcher.cli import parse
from towerpack.launcher.errors import UsageError
from towerpack.launcher.quorum import Quorum

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(90)]


def test_two_sides_of_a_split_never_both_hold_a_quorum():
    three = Quorum.of([0, 1, 2], coordinator=0)
    assert three.met_by({1, 2}) and not three.met_by({0}) and three.majority == 2
    two = Quorum.of([0, 1], coordinator=0)  # a tie goes to the side that has the coordinator
    assert two.met_by({0}) and not two.met_by({1})
    assert "half of them without its coordinator (node 0)" in two.shortfall({1})
    four = Quorum.of([0, 1, 2, 3], coordinator=0)
    for side in ({0}, {0, 1}, {0, 1, 2}, {1}, {1, 2}, {1, 2, 3}, {2, 3}):
        assert not (four.met_by(side) and four.met_by({0, 1, 2, 3} - side)), side
    assert four.met_by({0, 1}) and not four.met_by({2, 3}) and four.met_by({1, 2, 3, 7})


def test_master_may_list_several_nodes_in_elastic_jobs_only():
    spec = parse(["--nnodes", "1:3", "--node-rank", "1", "--master", "127.0.0.1:7001,127.0.0.2", "--np", "1",
                  COUNTER], env=SECRET)  # fmt: skip
    assert spec.masters == (("127.0.0.1", 7001), ("127.0.0.2", 29400))
    assert (spec.master_addr, spec.master_port) == ("127.0.0.1", 7001)
    with pytest.raises(UsageError, match="several addresses only in elastic jobs"):
        parse(["--nnodes", "2", "--node-rank", "1", "--master", "127.0.0.1:1,127.0.0.2:1", "--np", "1",
               COUNTER], env=SECRET)  # fmt: skip


def _coordinator(out, attempt: int) -> str:
    """The address of the node that coordinated ``attempt`` (the ranks' MASTER_ADDR)."""
    return re.search(rf"^attempt {attempt} .* master (\S+)$", (out / "log").read_text(), re.M).group(1)


def _start(net: NetCluster, i: int, masters: list[int], port: int, out, steps: int) -> subprocess.Popen:
    """A launcher on node ``i`` of a 1:3 job whose ``--master`` lists the nodes ``masters`` (node 0 first
    marks it)."""
    master = ",".join(f"{net.nodes[m].addr}:{port}" for m in masters)
    argv = [*LAUNCH, "--nnodes", "1:3", "--master", master, "--np", "1", "--backend", "none",
            "--heartbeat-timeout", "3", COUNTER, str(out), str(steps)]  # fmt: skip
    env = dict(os.environ, **SECRET)
    return net.popen(i, argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_node_0_killed_the_survivors_go_on_and_a_late_joiner_finds_the_new_coordinator(tmp_path):
    require_netns()
    port = free_port()
    with NetCluster(3) as net:
        nodes = [_start(net, i, [0, 1, 2], port, tmp_path, 120) for i in range(3)]
        wait_for(lambda: len(_log(tmp_path)) == 3 and len(_steps(tmp_path, 0)) >= 10, 30, what="three nodes")
        nodes[0].kill()
        killed = time.monotonic()
        wait_for(lambda: _steps(tmp_path, 1), 20, interval=0.01, what="attempt 1 to take its first step")
        print(f"node 0 killed -> first step of attempt 1: {time.monotonic() - killed:.2f} s")
        wait_for(lambda: len(_steps(tmp_path, 1)) >= 5, 20, what="attempt 1 on two nodes")
        lead = next(i for i in (1, 2) if net.nodes[i].addr == _coordinator(tmp_path, 1))
        other = 3 - lead
        # A node that comes later knows node 0 and the survivor that does not coordinate: node 0 is
        # gone, that survivor sends it on to the new coordinator.
        net.add_node()
        joiner = _start(net, 3, [0, other], port, tmp_path, 120)
        (rc1, _, err1), (rc2, _, err2), (rc3, _, err3) = finish(nodes[lead], nodes[other], joiner, timeout=50)
        nodes[0].wait()
        addrs = [n.addr for n in net.nodes]
    assert (rc1, rc2, rc3) == (0, 0, 0), err1 + err2 + err3
    log = _log(tmp_path)
    assert [x[:4] for x in log] == [
        (0, 0, 3, 0), (0, 1, 3, 1), (0, 2, 3, 2),  # node 0 coordinates
        (1, 0, 2, 0), (1, 1, 2, 1),  # node 1 took over: dense node ranks 0 and 1
        (2, 0, 3, 0), (2, 1, 3, 1), (2, 2, 3, 2),  # the joiner made three again
    ], log  # fmt: skip
    assert [x[5:] for x in log[3:]] == [("membership", 3)] * 2 + [("membership", 2)] * 3
    # Rank 0 died with node 0 (no checkpoint): attempt 1 starts over; attempt 2 resumes where 1 stopped.
    assert log[3][4] == 0 and log[5][4] == _steps(tmp_path, 1)[-1] > 0 and _steps(tmp_path, 2)[-1] == 120
    assert f"lost contact with node 0 at {addrs[0]}:" in err2 and "rejoined the job: node 1" in err2, err2
    assert f"node 1 ({addrs[lead]}) takes over as the coordinator from node 0 ({addrs[0]})" in err1, err1
    took = re.search(r"attempt 1 \(membership\): 2 node\(s\), world size 2 \((\S+) s after losing", err1)
    assert took and float(took.group(1)) < 5, err1
    redirect = f"{addrs[other]}:{port}: node 1 coordinates this job, at {addrs[lead]}:{port}; joining there"
    assert redirect in err3, err3
    changes = err1.split("membership changes:\n")[1].splitlines()
    assert changes[0].startswith("    ") and "lost: its launcher's connection closed" in changes[0], err1
    assert re.search(rf"node 0 \({re.escape(addrs[0])}\) left \(lost: .*world size 3 -> 2", changes[0]), err1
    assert re.search(rf"node 3 \({re.escape(addrs[3])}\) joined; world size 2 -> 3", changes[1]), err1
    assert_job_gone(timeout=5.0)


def test_node_0_cut_off_alone_stops_while_the_majority_goes_on(tmp_path):
    require_netns()
    port = free_port()
    with NetCluster(3) as net:
        nodes = [_start(net, i, [0, 1, 2], port, tmp_path, 100) for i in range(3)]
        wait_for(lambda: len(_log(tmp_path)) == 3 and len(_steps(tmp_path, 0)) >= 10, 30, what="three nodes")
        net.cut(0)
        cut = time.monotonic()
        ((rc0, _, err0),) = finish(nodes[0], timeout=30)
        alone_for = time.monotonic() - cut
        wait_for(lambda: _steps(tmp_path, 1), 20, what="attempt 1 to run on the majority")
        lead = next(i for i in (1, 2) if net.nodes[i].addr == _coordinator(tmp_path, 1))
        (rc1, _, err1), (rc2, _, err2) = finish(nodes[lead], nodes[3 - lead], timeout=40)
        addrs = [n.addr for n in net.nodes]
    # Node 0 saw both others go silent: 1 of 3 is no quorum, so it stopped its rank and ended; with
    # --nnodes 1:3 it would otherwise have gone on alone, a second job beside the majority's.
    assert rc0 == 1 and alone_for < 15, (alone_for, err0)
    assert "stops: no quorum: only 1 of the 3 nodes of the last membership" in err0, err0
    assert "attempt 1" not in err0
    assert (rc1, rc2) == (0, 0), err1 + err2
    log = _log(tmp_path)
    assert [x[:4] for x in log] == [(0, 0, 3, 0), (0, 1, 3, 1), (0, 2, 3, 2), (1, 0, 2, 0), (1, 1, 2, 1)], log
    # Node 0 may see one peer go silent before the other: then it still holds a quorum and asks its
    # rank for a checkpoint (SIGUSR1) before the second loss stops it; otherwise it stops it without
    # one. Either way the majority resumes from no later than node 0's last step.
    assert log[3][4] <= _steps(tmp_path, 0)[-1] and _steps(tmp_path, 1)[-1] == 100
    assert f"node 1 ({addrs[lead]}) takes over as the coordinator from node 0 ({addrs[0]})" in err1, err1
    assert f"node 0 ({addrs[0]}) left (silent: no heartbeat for 3 s" in err1, err1
    assert "rejoined the job: node 1" in err2, err2
    assert_job_gone(timeout=5.0)
