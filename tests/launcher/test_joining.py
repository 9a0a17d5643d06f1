"""Joining node 0 at scale: agents retry what a busy node 0 explains (no answer, BUSY) and give up at once
on a definite refusal; many real node launchers join a node 0 that was too busy to answer at first."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
import time

import pytest

from support.launcher_run import LAUNCH, assert_job_gone
from support.procs import free_port, wait_for
from towerpack.launcher.admission import ControlServer
from towerpack.launcher.errors import USAGE_EXIT
from towerpack.launcher.joining import FIRST_ANSWER_S, JoinFailed, join
from towerpack.launcher.plan import NodeInfo
from towerpack.launcher.protocol import Join, Welcome

pytestmark = pytest.mark.multiprocess
SECRET = b"the-secret-of-the-joining-tests"


def _info(node: int) -> NodeInfo:
    return NodeInfo(node, "127.0.0.1", f"h{node}", 1, None, (free_port(), free_port()), None)


@pytest.mark.timeout(60)
def test_busy_is_retried_and_a_full_job_or_another_job_is_refused_at_once():
    server = ControlServer("127.0.0.1", 0, SECRET, 2, {1}, 0, Welcome(1.0, 10.0, 1.0), queue.SimpleQueue())
    first = second = None
    try:
        first, _ = join("127.0.0.1", server.port, SECRET, Join(_info(1), 2, 0), timeout=10)
        # Node 1 again, as an agent whose first connection timed out on its side: BUSY until node 0
        # sees the first connection end, then it is welcome (the job has not started).
        outcome: dict = {}

        def again():
            began = time.monotonic()
            outcome["conn"], _ = join("127.0.0.1", server.port, SECRET, Join(_info(1), 2, 0), timeout=30)
            outcome["took"] = time.monotonic() - began

        retrying = threading.Thread(target=again)
        retrying.start()
        time.sleep(1.5)
        assert retrying.is_alive()  # refused as BUSY, and trying again
        first.close()
        retrying.join(30)
        second = outcome["conn"]
        assert outcome["took"] >= 1.5
        assert server.wait_all(5) == [] and server.started
        # Now node 1 is in the running job: another node 1 is refused at once, as is another job.
        for msg, words in (
            (Join(_info(1), 2, 0), "node rank 1 is already in the running job"),
            (Join(_info(1), 3, 0), "node 0 runs --nnodes 2 --ps 0, this node --nnodes 3 --ps 0"),
        ):
            began = time.monotonic()
            with pytest.raises(JoinFailed) as failed:
                join("127.0.0.1", server.port, SECRET, msg, timeout=30)
            assert time.monotonic() - began < 5
            assert failed.value.code == USAGE_EXIT and words in str(failed.value)
    finally:
        for conn in (first, second):
            if conn is not None:
                conn.close()
        server.close()


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("nnodes", "size"), [(48, "48"), (12, "12:12")], ids=["fixed", "elastic"])
def test_many_node_launchers_join_a_node_0_too_busy_to_answer_at_first(tmp_path, nnodes, size):
    """Node 0 is frozen (SIGSTOP) while every other node's launcher connects: none gets an answer within
    its first handshake wait, all try again, and once node 0 runs again every node joins and the job
    (each rank touching a file named after its RANK) ends with exit code 0 everywhere."""
    port = free_port()
    env = dict(os.environ, TOWERPACK_LAUNCH_SECRET=SECRET.decode())

    def node(rank: int) -> subprocess.Popen:
        argv = [
            *LAUNCH, "--nnodes", size, "--node-rank", str(rank), "--master", f"127.0.0.1:{port}",
            "--np", "1", "--backend", "none", "--start-timeout", "120",
            "--no-python", "sh", "-c", f'touch "{tmp_path}/ran.$RANK"',
        ]  # fmt: skip
        with open(tmp_path / f"node{rank}.err", "w") as err:
            return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)

    def err(rank: int) -> str:
        return (tmp_path / f"node{rank}.err").read_text()

    procs = [node(0)]
    try:
        wait_for(lambda: "waiting for" in err(0), 30, what="node 0 to listen")
        os.kill(procs[0].pid, signal.SIGSTOP)
        procs += [node(rank) for rank in range(1, nnodes)]
        retried = f"node 0 did not answer within {FIRST_ANSWER_S:g} s; trying again"
        wait_for(
            lambda: all(retried in err(r) for r in range(1, nnodes)),
            90,
            what="every node's first handshake to time out",
        )
        os.kill(procs[0].pid, signal.SIGCONT)
        codes = [p.wait(timeout=60) for p in procs]
        assert codes == [0] * nnodes, "\n".join(err(r)[-500:] for r in range(nnodes) if codes[r])
        assert sorted(int(f.name.split(".")[1]) for f in tmp_path.glob("ran.*")) == list(range(nnodes))
        assert_job_gone(timeout=5.0)
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
            proc.wait()
