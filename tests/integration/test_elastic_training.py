"""Elastic, exactly resumed training end to end: real launchers in network namespaces, real Horovod and
TF-server jobs whose items carry ids, so each test can count what every epoch trained on.

A step's ids count when it succeeded and no later attempt started from an earlier checkpoint: an attempt
that began at global step S replaces every step after S of the attempts before it. A job resized in place
stays in one attempt: its ranks keep their processes, and a joining rank's steps count from its regroup.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.netcluster import NetCluster, require_netns
from support.procs import wait_for

pytestmark = [pytest.mark.multiprocess]

SCRIPT = str(Path(__file__).resolve().parent / "ranks" / "ids_train.py")
N_ITEMS, EPOCHS = 240, 3
PORT = 29400  # every cluster has a network stack of its own
ENV = {"TOWERPACK_LAUNCH_SECRET": "secret-of-the-elastic-training-tests", "PYTHONUNBUFFERED": "1"}


def _launch(
    net: NetCluster, i: int, logdir: Path, *args: str, rank: int | None = None, step_s: str = "0.1"
) -> subprocess.Popen:
    where = ["--node-rank", str(rank)] if rank is not None else []
    argv = [sys.executable, "-m", "towerpack.launcher", *where, "--master", f"{net.nodes[0].addr}:{PORT}",
            "--np", "1", "--heartbeat-timeout", "4", *args, SCRIPT, str(logdir), step_s]  # fmt: skip
    path = logdir.parent / f"launch-{i}-{len(list(logdir.parent.glob(f'launch-{i}-*')))}.txt"
    with open(path, "w") as out:
        return net.popen(i, argv, env=dict(os.environ, **ENV), stdout=out, stderr=subprocess.STDOUT)


def _events(logdir: Path) -> list[list[str]]:
    path = logdir / "events"
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def _starts(logdir: Path) -> list[tuple[int, int, int, int]]:
    """``(pid, world size, start step, attempt)`` of every rank start, in order."""
    return [(int(e[1]), int(e[3]), int(e[5]), int(e[6])) for e in _events(logdir) if e[0] == "start"]


def _last_step(logdir: Path) -> int:
    steps = [int(line.split()[0]) for p in logdir.glob("ids.*") for line in p.read_text().splitlines()]
    return max(steps, default=0)


def trained_ids(logdir: Path) -> dict[int, list[int]]:
    """Epoch -> the ids of every step that counts (see the module docstring)."""
    attempts: dict[int, tuple[int, list[int]]] = {}  # attempt -> (its first rank's start step, pids)
    for pid, _, step, attempt in _starts(logdir):
        attempts.setdefault(attempt, (step, []))[1].append(pid)  # a rank that joins in place starts later
    order = sorted(attempts)
    epochs_of = collections.defaultdict(list)  # pid -> [(steps before the epoch, epoch)]
    for e in _events(logdir):
        if e[0] == "epoch":
            epochs_of[int(e[1])].append((int(e[3]), int(e[2])))
    by_epoch = collections.defaultdict(list)
    for k, attempt in enumerate(order):
        start, pids = attempts[attempt]
        end = attempts[order[k + 1]][0] if k + 1 < len(order) else float("inf")
        for pid in pids:
            path = logdir / f"ids.{pid}"
            for line in path.read_text().splitlines() if path.exists() else []:
                step, *ids = map(int, line.split())
                if start < step <= end:
                    epoch = max(e for before, e in epochs_of[pid] if before < step)
                    by_epoch[epoch].extend(ids)
    return dict(by_epoch)


def assert_each_item_once_per_epoch(logdir: Path, resized: set[int], tail: int) -> None:
    """Every epoch trains each item once; an epoch continued at another world size may skip up to
    ``tail`` items at its end (``remainder="drop"``: what is left is split among the ranks in whole
    batches, so fewer than world size x batch items are left over)."""
    epochs = trained_ids(logdir)
    assert sorted(epochs) == list(range(1, EPOCHS + 1))
    for epoch, ids in epochs.items():
        counts = collections.Counter(ids)
        twice = sorted(i for i, c in counts.items() if c > 1)
        missing = sorted(set(range(N_ITEMS)) - set(counts))
        assert not twice, f"epoch {epoch}: trained twice {twice}"
        allowed = tail if epoch in resized else 0
        assert len(missing) <= allowed, f"epoch {epoch}: never trained {missing}"


def _resized(logdir: Path) -> list[tuple[int, int, int]]:
    """``(pid, world size, global step)`` of every rank's first step after a resize in place."""
    return [(int(e[1]), int(e[3]), int(e[4])) for e in _events(logdir) if e[0] == "resized"]


def _resized_epochs(logdir: Path) -> set[int]:
    """The epochs in which the job was resized in place (where the ``remainder="drop"`` tail applies)."""
    epochs_of = collections.defaultdict(list)
    for e in _events(logdir):
        if e[0] == "epoch":
            epochs_of[int(e[1])].append((int(e[3]), int(e[2])))
    return {max(ep for before, ep in epochs_of[pid] if before < step) for pid, _, step in _resized(logdir)}


@pytest.mark.timeout(420)
def test_horovod_job_loses_a_node_to_a_partition_and_grows_again_in_place(tmp_path):
    """3 nodes at --nnodes 2:3; node 2's link is cut in epoch 2: the two others regroup in place at world
    size 2 (same processes, no checkpoint read) once their collective gives up on the silent peer; then a new
    node joins in the middle of epoch 2: its rank builds its graph while the others train, and all three
    regroup in place. The cut-off node stops (it lost its coordinator and has no quorum). Every epoch trains
    each item once, the items of the lost rank's part included."""
    require_netns()
    logdir = tmp_path / "log"
    logdir.mkdir()
    with NetCluster(3) as net:
        # Steps of 0.3 s: a joining rank (TensorFlow's import, its graph) must come before the job ends.
        nodes = [_launch(net, 0, logdir, "--nnodes", "2:3", rank=0, step_s="0.3")]
        nodes += [_launch(net, i, logdir, "--nnodes", "2:3", step_s="0.3") for i in (1, 2)]
        wait_for(lambda: _last_step(logdir) >= 24, 180, what="3 nodes to train into epoch 2")
        assert {w for _, w, _, _ in _starts(logdir)} == {3}
        cut = net.nodes[2].addr
        net.cut(2)
        wait_for(lambda: any(w == 2 for _, w, _ in _resized(logdir)), 90, what="a regroup at 2 nodes")
        after = max(s for _, w, s in _resized(logdir) if w == 2)
        wait_for(lambda: _last_step(logdir) >= after + 2, 120, what="2 nodes to train")
        joined = net.add_node()
        nodes.append(_launch(net, joined.index, logdir, "--nnodes", "2:3", step_s="0.3"))
        assert nodes[0].wait(timeout=240) == 0
        assert nodes[1].wait(timeout=30) == 0 and nodes[3].wait(timeout=30) == 0
        assert nodes[2].wait(timeout=60) != 0  # cut off: it lost its coordinator
    starts = _starts(logdir)
    assert [(w, a) for _, w, _, a in starts] == [(3, 0)] * 4, starts  # no restart: one rank joined
    survivors = {pid for pid, _, _, _ in starts[:3]} & {pid for pid, w, _ in _resized(logdir) if w == 2}
    assert len(survivors) == 2, _resized(logdir)
    assert {pid for pid, w, _ in _resized(logdir) if w == 3} == survivors | {starts[3][0]}
    assert_each_item_once_per_epoch(logdir, resized=_resized_epochs(logdir), tail=3 * 4 - 1)
    summary = (tmp_path / "launch-0-0.txt").read_text()
    assert f"({cut}) left (silent" in summary and f"({joined.addr}) joined" in summary, summary[-3000:]
    assert "resized in place to world size 2" in summary and "resized in place to world size 3" in summary
    assert "attempt 1" not in summary, summary[-3000:]


@pytest.mark.timeout(300)
def test_tf_server_job_preempted_mid_epoch_resumes_on_fewer_nodes(tmp_path):
    """3 nodes (TF-server backend) get SIGUSR1 in the middle of epoch 2 and checkpoint; the job is
    started again on 2 nodes and finishes: every epoch trains each item once."""
    require_netns()
    logdir = tmp_path / "log"
    logdir.mkdir()
    with NetCluster(3) as net:
        args = ["--backend", "tf-server", "--ps", "1"]
        nodes = [_launch(net, i, logdir, "--nnodes", "3", *args, rank=i) for i in range(3)]
        wait_for(lambda: _last_step(logdir) >= 27, 180, what="3 nodes to train into epoch 2")
        nodes[0].send_signal(signal.SIGUSR1)
        assert [p.wait(timeout=90) for p in nodes] == [128 + signal.SIGUSR1] * 3
        stopped_at = _last_step(logdir)
        assert 20 < stopped_at < 40
        nodes = [_launch(net, i, logdir, "--nnodes", "2", *args, rank=i) for i in range(2)]
        assert [p.wait(timeout=200) for p in nodes] == [0, 0]
    assert [w for _, w, _, _ in _starts(logdir)] == [3, 3, 3, 2, 2]
    assert_each_item_once_per_epoch(logdir, resized={2}, tail=2 * 4 - 1)
