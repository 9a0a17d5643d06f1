"""Resizes in place, the launcher's side: real launchers on loopback, ranks that speak the resize files
(``ranks/resize_speaker.py``, no TensorFlow), so each test sees which processes were kept and what each
was told. Training jobs resized in place are in tests/integration/test_elastic_training.py."""

from __future__ import annotations

import re

import pytest

from support.launcher_run import assert_job_gone, finish, rank_script, start_launch
from support.procs import free_port, wait_for

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(90)]
SPEAKER = rank_script("resize_speaker.py")
SECRET = {"TOWERPACK_LAUNCH_SECRET": "secret-of-the-resize-tests"}


def _node(port: int, rank: int | None, out, steps: int, *args: str, addr: str | None = None, mode: str = ""):
    where = ["--node-rank", str(rank)] if rank is not None else []
    extra = ["--node-addr", addr] if addr else []
    return start_launch(
        "--nnodes", "1:2", *where, "--master", f"127.0.0.1:{port}", *extra, "--np", "1",
        "--backend", "horovod", "--heartbeat-timeout", "3", *args, SPEAKER, str(out), str(steps),
        *([mode] if mode else []), env=SECRET,
    )  # fmt: skip


def _lines(out, kind: str) -> list[list[str]]:
    path = out / "log"
    text = path.read_text() if path.exists() else ""
    return [line.split() for line in text.splitlines() if line.startswith(kind + " ")]


def _steps(out) -> int:
    path = out / "steps"
    return len(path.read_text().split()) if path.exists() else 0


def _kill_all(*procs) -> None:
    for proc in procs:
        if proc is not None:
            proc.kill()
            proc.wait()


def test_a_lost_node_and_a_joining_one_resize_the_job_in_place(tmp_path):
    """Node 1 is killed: node 0's rank, still running, is told it is rank 0 of 1; a new node joins: its
    rank starts as a joiner, says when it is ready, and only then are both told of world size 2. Rank 0's
    process and its count of steps go on throughout."""
    port = free_port()
    node0 = _node(port, 0, tmp_path, 160)
    node1 = _node(port, 1, tmp_path, 160, addr="127.0.0.2")
    node2 = None
    try:
        wait_for(lambda: _steps(tmp_path) >= 10, 30, what="two nodes to run")
        node1.kill()
        wait_for(lambda: len(_lines(tmp_path, "regroup")) >= 1, 20, what="a regroup at world size 1")
        node2 = _node(port, 1, tmp_path, 160, addr="127.0.0.3")
        (rc0, _, err0), (rc2, _, err2) = finish(node0, node2, timeout=40)
        assert (rc0, rc2) == (0, 0), err0 + err2
        starts, regroups = _lines(tmp_path, "start"), _lines(tmp_path, "regroup")
        first = starts[0][1] if starts[0][3] == "0" else starts[1][1]  # rank 0's pid
        assert [s[3:] for s in starts] in (
            [["0", "world", "2", "gen", "0", "join", "0"], ["1", "world", "2", "gen", "0", "join", "0"],
             ["1", "world", "2", "gen", "1", "join", "1"]],
            [["1", "world", "2", "gen", "0", "join", "0"], ["0", "world", "2", "gen", "0", "join", "0"],
             ["1", "world", "2", "gen", "1", "join", "1"]],
        ), starts  # fmt: skip
        joiner = starts[2][1]
        assert regroups[0] == ["regroup", first, "rank", "0", "world", "1", "gen", "1"], regroups
        assert sorted(regroups[1:]) == sorted(
            [["regroup", first, "rank", "0", "world", "2", "gen", "2"],
             ["regroup", joiner, "rank", "1", "world", "2", "gen", "2"]]
        ), regroups  # fmt: skip
        assert _steps(tmp_path) == 160  # one count, never restarted
        assert "attempt 1" not in err0, err0
        assert re.search(r"resized in place to world size 1 \(generation 1\)", err0), err0
        assert re.search(r"resized in place to world size 2 \(generation 2\)", err0), err0
        assert re.search(r"node 1 \(127\.0\.0\.2\) left .*world size 2 -> 1", err0), err0
        assert re.search(r"node 2 \(127\.0\.0\.3\) joined; world size 1 -> 2", err0), err0
        assert_job_gone(timeout=5.0)
    finally:
        _kill_all(node0, node1, node2)


def test_ranks_that_cannot_resize_in_place_or_die_in_the_regroup_restart_the_job(tmp_path):
    """A rank that says it cannot regroup makes a lost node restart the job, as before; so does a rank that
    dies while it regroups (a clean restart at the new size, not a failure of the job)."""
    port = free_port()
    for mode in ("cannot", "die"):
        out = tmp_path / mode
        out.mkdir()
        node0 = _node(port, 0, out, 60, mode=mode)
        node1 = _node(port, 1, out, 60, addr="127.0.0.2", mode=mode)
        try:
            ready = lambda: len(_lines(out, "start")) == 2 and _steps(out) >= 5  # noqa: B023
            wait_for(ready, 30, what="two nodes to run")
            node1.kill()
            (rc0, _, err0), _ = finish(node0, node1, timeout=40)
            assert rc0 == 0, err0
            if mode == "cannot":
                assert "cannot resize in place (a rank of node 0" in err0 and "it was told not to" in err0, (
                    err0
                )
            else:
                assert "rank 0 on host 127.0.0.1 failed while resizing in place (exit code 3)" in err0, err0
            assert "attempt 1 (membership): 1 node(s), world size 1" in err0, err0
            assert not _lines(out, "regroup")
            assert_job_gone(timeout=5.0)
        finally:
            _kill_all(node0, node1)
