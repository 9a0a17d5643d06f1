"""Elastic jobs: seconds from losing a node to the first training step at the smaller size.

Two node launchers on loopback (``launch --nnodes 1:2``) train the example CIFAR ResNet
(``examples/resnet/cifar_resnet.py --short``, HorovodTrainer, one rank per node). Once the first
epoch's checkpoint is saved, node 1 is lost: its launcher is killed (SIGKILL: its connection closes)
or, without ``--quick``, frozen (SIGSTOP of its every process group: it goes silent). The time from
then to rank 0's first step at world size 1 is split into:

- detection: until node 0's launcher reports the node lost (against ``--heartbeat-timeout``);
- stop: until every rank of node 0 is stopped (SIGUSR1, 5 s to answer, then SIGTERM and SIGKILL);
- rendezvous: until the next attempt is planned (what the launcher prints);
- restart: from the end of the rendezvous until the new rank's Python starts;
- checkpoint load: until training is about to begin (TensorFlow import, graph, session, restore);
- first step: until its first step ends.

Goal (issue 21): detection within the heartbeat timeout, everything after it under 20 s.
Usage: ``python benchmarks/elastic.py [--quick] [--heartbeat-timeout S]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "resnet" / "cifar_resnet.py"
AFTER_DETECTION_GOAL_S = 20.0

# Runs the example unchanged, with a callback that writes when this rank started, when training is
# about to begin (checkpoint restored) and its step count.
WRAPPER = """
import os, runpy, sys, time
started = time.time()
out, attempt, rank = os.environ["ELASTIC_BENCH_OUT"], os.environ["RESTART_COUNT"], os.environ["RANK"]


def mark(what, value):
    path = os.path.join(out, f"{what}.{attempt}.{rank}")
    with open(path + ".tmp", "w") as f:
        f.write(repr(value))
    os.replace(path + ".tmp", path)


mark("start", started)
from towerpack.trainer import Callback
from towerpack.trainer import config as train_config


class Timer(Callback):
    _chief_only = False
    steps = 0

    def _before_train(self):
        mark("loaded", time.time())

    def _trigger_step(self):
        self.steps += 1
        if self.steps == 1:
            mark("first_step", time.time())
        mark("steps", self.steps)


original = train_config.TrainConfig.__init__


def with_timer(self, *args, **kwargs):
    original(self, *args, **kwargs)
    self.callbacks.append(Timer())


train_config.TrainConfig.__init__ = with_timer
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""


class Lines:
    """A launcher's stderr, each line with the time it arrived."""

    def __init__(self, stream):
        self.lines: list[tuple[float, str]] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append((time.time(), line.rstrip("\n")))

    def first(self, text: str) -> tuple[float, str] | None:
        return next(((t, line) for t, line in self.lines if text in line), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _read(path: Path) -> float | None:
    try:
        return float(path.read_text())
    except (FileNotFoundError, ValueError):
        return None


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")


def _stop_tree(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGCONT)
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                child.kill()
    proc.wait()


def run_case(how: str, heartbeat: float, work: Path) -> dict:
    out = work / how
    out.mkdir()
    wrapper = work / "timed_rank.py"
    wrapper.write_text(WRAPPER)
    port = _free_port()
    env = dict(
        os.environ,
        ELASTIC_BENCH_OUT=str(out),
        TOWERPACK_LAUNCH_SECRET="elastic-benchmark-secret",
        TF_CPP_MIN_LOG_LEVEL="2",
    )

    def node(rank: int, addr: str) -> subprocess.Popen:
        argv = [
            sys.executable, "-m", "towerpack.launcher", "--nnodes", "1:2", "--node-rank", str(rank),
            "--master", f"127.0.0.1:{port}", "--node-addr", addr, "--np", "1", "--backend", "horovod",
            "--heartbeat-timeout", str(heartbeat), "--ranks", "0", str(wrapper), str(EXAMPLE), "--short",
            "--epochs", "100", "--logroot", str(out / "train_log"),
        ]  # fmt: skip
        return subprocess.Popen(
            argv, env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip

    node0, node1 = node(0, "127.0.0.1"), node(1, "127.0.0.2")
    lines = Lines(node0.stderr)
    try:
        checkpoint = out / "train_log" / "resnet" / "checkpoint"
        _wait(lambda: checkpoint.exists() and _read(out / "steps.0.0"), 600, "the first epoch's checkpoint")
        lost_at = time.time()
        if how == "killed":
            _stop_tree(node1)
        else:
            for proc in [psutil.Process(node1.pid), *psutil.Process(node1.pid).children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    proc.suspend()
        first = _wait(lambda: _read(out / "first_step.1.0"), 300, "the first step at world size 1")
        noticed, _ = _wait(lambda: lines.first("lost ("), 10, "the loss line")
        _, attempt_line = _wait(lambda: lines.first("attempt 1 "), 10, "the attempt line")
        stopping = float(attempt_line.split("stopping took ")[1].split(" s")[0])
        rendezvous = float(attempt_line.split("rendezvous ")[1].split(" s")[0])
        started, loaded = _read(out / "start.1.0"), _read(out / "loaded.1.0")
        return {
            "detection": noticed - lost_at,
            "stop": stopping,
            "rendezvous": rendezvous,
            "restart": started - (noticed + stopping + rendezvous),
            "checkpoint load": loaded - started,
            "first step": first - loaded,
            "total": first - lost_at,
        }
    finally:
        _stop_tree(node0)
        _stop_tree(node1)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="only the killed launcher, not the frozen node")
    p.add_argument("--heartbeat-timeout", type=float, default=10.0)
    args = p.parse_args()
    cases = ["killed"] if args.quick else ["killed", "frozen"]
    with tempfile.TemporaryDirectory(prefix="elastic-bench-") as tmp:
        results = {how: run_case(how, args.heartbeat_timeout, Path(tmp)) for how in cases}
    phases = list(next(iter(results.values())))
    print(f"{'seconds':<16}" + "".join(f"{how:>10}" for how in cases))
    for phase in phases:
        print(f"{phase:<16}" + "".join(f"{results[how][phase]:>10.2f}" for how in cases))
    for how, r in results.items():
        after = r["total"] - r["detection"]
        rows = [
            (f"node {how}: detection", r["detection"], args.heartbeat_timeout),
            (f"node {how}: detection to first step", after, AFTER_DETECTION_GOAL_S),
        ]
        for case, ours, baseline in rows:
            line = {"benchmark": "elastic", "case": case, "ours": round(ours, 3), "baseline": baseline,
                    "unit": "s", "ratio": round(ours / baseline, 3), "goal": 1.0}  # fmt: skip
            print("RESULT " + json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
