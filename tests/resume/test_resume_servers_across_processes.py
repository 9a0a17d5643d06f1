"""Exact resume through `dataflow serve` data servers, end to end under `launch`: items carry their ids
and data epoch; two Horovod ranks read one server and are stopped with SIGUSR1 mid-epoch; the job
resumes as one rank reading two servers (each serving a fixed half of every epoch), and one of them
is killed and restarted while it trains. Every data epoch trains each item once.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys

import psutil
import pytest

from support.items_jobs import RANKS, Items, assert_each_item_once, start, steps_done, stop_after
from support.launcher_run import assert_job_gone
from support.procs import free_port, terminate_tree, wait_for

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]

SERVE = [sys.executable, "-m", "towerpack.dataflow.cli", "serve", "serve_items:make_df"]


def serve(port: int, *args: str) -> subprocess.Popen:
    """A `dataflow serve` of serve_items.make_df on ``port``, once it listens."""
    proc = subprocess.Popen(
        [*SERVE, "--bind", f"tcp://127.0.0.1:{port}", *args],
        cwd=RANKS,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    for line in proc.stdout:
        if "serving on" in line:
            return proc
    raise AssertionError(f"dataflow serve on port {port} did not start (exit code {proc.wait()})")


def stop(server: subprocess.Popen, sig: int = signal.SIGINT) -> str:
    """Stop a server; what it printed after it started listening."""
    server.send_signal(sig)
    try:
        return server.communicate(timeout=20)[0]
    except subprocess.TimeoutExpired:
        terminate_tree(server.pid)
        return server.communicate(timeout=10)[0]


@pytest.mark.timeout(600)
def test_servers_restarted_and_resized_serve_each_item_once(tmp_path, horovod_required):
    logdir = tmp_path / "log"
    logdir.mkdir()
    ports = [free_port() for _ in range(3)]
    servers = [serve(ports[0], "--workers", "2")]
    try:
        addrs = f"tcp://127.0.0.1:{ports[0]}"
        stop_after(start(logdir, 2, "--pipeline", "servers", "--addrs", addrs), logdir, 40)
        first = steps_done(logdir)
        stop(servers.pop())
        servers = [serve(ports[1], "--shard", "0/2"), serve(ports[2], "--shard", "1/2")]
        addrs = ",".join(f"tcp://127.0.0.1:{p}" for p in ports[1:])
        proc = start(logdir, 1, "--pipeline", "servers", "--addrs", addrs, "--step-s", "0.1")  # ~10 s
        wait_for(lambda: steps_done(logdir) >= first + 10 or proc.poll() is not None, 240, what="training")
        stop(servers.pop(), signal.SIGKILL)  # a server dies in the middle of an epoch, and comes back
        servers.append(serve(ports[2], "--shard", "1/2"))
        assert proc.wait(timeout=240) == 0
        trees = [[psutil.Process(s.pid), *psutil.Process(s.pid).children(recursive=True)] for s in servers]
        assert_job_gone(timeout=2.0, exclude=tuple(p.pid for tree in trees for p in tree))
    finally:
        said = [stop(s) for s in servers]
    # The restarted server was joined by the running rank, which told it what it had received.
    joined = re.search(
        r"session \w+: 1 ranks joined; generation \d+ serves from epoch (\d) \((\d+) of 240", said[-1]
    )
    assert joined and int(joined[1]) >= 2 and int(joined[2]) > 0, said
    items = Items()
    assert_each_item_once(logdir, lambda epoch, positions: items.epoch_order(epoch)[positions].tolist())
