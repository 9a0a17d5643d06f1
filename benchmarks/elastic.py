"""Elastic jobs: seconds from losing a node to the first training step at the smaller size.

Node launchers on loopback train the example CIFAR ResNet (``examples/resnet/cifar_resnet.py
--short``, HorovodTrainer, one rank per node). Once the first epoch's checkpoint is saved, a node is
lost, and the time from then to the first step of the next attempt's rank 0 is split into phases.

Case ``lost``: two nodes (``--nnodes 1:2``); node 1 is lost: its launcher and ranks are killed
(SIGKILL: its connection closes) or, without ``--quick``, frozen (SIGSTOP of its every process: it
goes silent). Measured on node 0, down to world size 1:

- detection: until node 0's launcher reports the node lost (against ``--heartbeat-timeout``);
- stop: until every rank of node 0 is stopped (SIGUSR1, 5 s to answer, then SIGTERM and SIGKILL);
- rendezvous: until the next attempt is planned (what the launcher prints);
- restart: from the end of the rendezvous until the new rank's Python starts;
- checkpoint load: until training is about to begin (TensorFlow import, graph, session, restore);
- first step: until its first step ends.

Case ``node0``: three nodes (``--nnodes 2:3``, every one listed in ``--master``); node 0, the
coordinator, is killed with its ranks. Measured on the survivor that takes over (the lowest node id
left), down to world size 2: detection (until it reports node 0 lost); stop (until its own ranks have
exited, seen from outside); rendezvous (the rest of the takeover: finding the next coordinator, the
quorum, the rendezvous; stop and rendezvous add up to the "X s after losing node 0" it prints); then
restart, checkpoint load and first step as above.

Goal (issue 21): detection within the heartbeat timeout, everything after it under 20 s.
Usage: ``python benchmarks/elastic.py [--case lost|node0|all] [--quick] [--heartbeat-timeout S]``.
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
PHASES = ("detection", "stop", "rendezvous", "restart", "checkpoint load", "first step", "total")

# Runs the example unchanged, with a callback that writes when this rank started, its world size, when
# training is about to begin (checkpoint restored) and its step count.
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
mark("world", int(os.environ["WORLD_SIZE"]))
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

    def tail(self, n: int = 15) -> str:
        return "\n".join(line for _, line in self.lines[-n:])


class Node:
    """One node's launcher, in a session of its own (as on a machine of its own), and its stderr."""

    def __init__(self, argv: list[str], env: dict, cwd: Path, wrapper: Path):
        self.wrapper = str(wrapper)
        self.proc = subprocess.Popen(
            argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        self.lines = Lines(self.proc.stderr)

    def ranks(self) -> list[psutil.Process]:
        """Its rank processes now (the launcher starts each in a session of its own)."""
        with contextlib.suppress(psutil.Error):
            kids = psutil.Process(self.proc.pid).children(recursive=True)
            return [p for p in kids if self.wrapper in _cmdline(p)]
        return []


class Exits:
    """When every process of each group had exited, watched from outside every 20 ms (for up to
    ``timeout`` seconds)."""

    def __init__(self, groups: dict[int, list[psutil.Process]], timeout: float = 120.0):
        self.at: dict[int, float] = {}
        self._groups, self._deadline = groups, time.monotonic() + timeout
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        while len(self.at) < len(self._groups) and time.monotonic() < self._deadline:
            for key, procs in self._groups.items():
                if key not in self.at and not any(map(_alive, procs)):
                    self.at[key] = time.time()
            time.sleep(0.02)


def _cmdline(proc: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        return " ".join(proc.cmdline())
    return ""


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _free_port(addr: str) -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
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


def _seconds(line: str, before: str, after: str) -> float:
    """The number between ``before`` and ``after`` in a launcher's line."""
    return float(line.split(before)[-1].split(after)[0])


def _stop_tree(proc: subprocess.Popen) -> None:
    """SIGKILL a launcher's process group and every process under it (its ranks run in sessions of
    their own: found before the launcher dies, as they are no longer its children after)."""
    kids: list[psutil.Process] = []
    with contextlib.suppress(psutil.Error):
        kids = psutil.Process(proc.pid).children(recursive=True)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGCONT)
        os.killpg(proc.pid, signal.SIGKILL)
    for child in kids:
        with contextlib.suppress(psutil.Error):
            child.kill()
    proc.wait()


def _sweep(marker: str) -> None:
    """SIGKILL whatever rank process of this run escaped its launcher (a frozen or killed tree)."""
    for proc in psutil.process_iter():
        if marker in _cmdline(proc):
            with contextlib.suppress(psutil.Error):
                proc.kill()


class Job:
    """Node launchers of one elastic job on loopback addresses 127.0.0.1, .2, ..., training the example
    through the timing wrapper; ``with`` ends them and every rank."""

    def __init__(self, work: Path, name: str, nnodes: str, n: int, masters: int, heartbeat: float):
        self.out = work / name
        self.out.mkdir()
        self.wrapper = work / "timed_rank.py"
        self.wrapper.write_text(WRAPPER)
        addrs = [f"127.0.0.{i + 1}" for i in range(n)]
        master = ",".join(f"{a}:{_free_port(a)}" for a in addrs[:masters])
        env = dict(
            os.environ,
            ELASTIC_BENCH_OUT=str(self.out),
            TOWERPACK_LAUNCH_SECRET="elastic-benchmark-secret",
            TF_CPP_MIN_LOG_LEVEL="2",
        )
        self.nodes: list[Node] = []
        for rank, addr in enumerate(addrs):
            argv = [
                sys.executable, "-m", "towerpack.launcher", "--nnodes", nnodes, "--node-rank", str(rank),
                "--master", master, "--node-addr", addr, "--np", "1", "--backend", "horovod",
                "--heartbeat-timeout", str(heartbeat), "--ranks", "0", str(self.wrapper), str(EXAMPLE),
                "--short", "--epochs", "100", "--logroot", str(self.out / "train_log"),
            ]  # fmt: skip
            self.nodes.append(Node(argv, env, work, self.wrapper))

    def mark(self, what: str, attempt: int = 0, rank: int = 0) -> float | None:
        return _read(self.out / f"{what}.{attempt}.{rank}")

    def wait_first_checkpoint(self) -> None:
        checkpoint = self.out / "train_log" / "resnet" / "checkpoint"
        _wait(lambda: checkpoint.exists() and self.mark("steps"), 900, "the first epoch's checkpoint")

    def wait_first_step(self, world: int) -> None:
        _wait(lambda: self.mark("first_step", 1), 300, f"the first step at world size {world}")
        if self.mark("world", 1) != world:
            raise RuntimeError(f"attempt 1 ran at world size {self.mark('world', 1)}, not {world}")

    def after(self, lost_at: float, noticed: float, planned: float, stopping: float) -> dict:
        """The phases from ``lost_at``, given when the loss was noticed, and how many seconds after
        that the ranks were stopped (``stopping``) and the next attempt planned (``planned``)."""
        started, loaded, first = (self.mark(what, 1) for what in ("start", "loaded", "first_step"))
        return dict(zip(PHASES, (
            noticed - lost_at, stopping, planned - stopping, started - (noticed + planned), loaded - started,
            first - loaded, first - lost_at,
        ), strict=True))  # fmt: skip

    def __enter__(self) -> Job:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        said = "\n".join(f"--- node {i}:\n{node.lines.tail()}" for i, node in enumerate(self.nodes))
        for node in self.nodes:
            _stop_tree(node.proc)
        _sweep(str(self.wrapper))
        if isinstance(exc, TimeoutError | RuntimeError):
            raise RuntimeError(f"{exc}; the launchers' last lines:\n{said}") from exc


def run_lost(how: str, heartbeat: float, work: Path) -> dict:
    """Node 1 of two killed or frozen, seen from node 0."""
    with Job(work, how, "1:2", 2, 1, heartbeat) as job:
        node0, node1 = job.nodes
        job.wait_first_checkpoint()
        lost_at = time.time()
        if how == "killed":
            _stop_tree(node1.proc)
        else:
            launcher = psutil.Process(node1.proc.pid)
            for proc in [launcher, *launcher.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    proc.suspend()
        job.wait_first_step(world=1)
        noticed, _ = _wait(lambda: node0.lines.first("lost ("), 10, "the loss line")
        _, attempt_line = _wait(lambda: node0.lines.first("attempt 1 "), 10, "the attempt line")
        stopping = _seconds(attempt_line, "stopping took ", " s")
        rendezvous = _seconds(attempt_line, "rendezvous ", " s")
        return job.after(lost_at, noticed, stopping + rendezvous, stopping)


def run_node0(heartbeat: float, work: Path) -> dict:
    """Node 0 of three killed, seen from the survivor that takes over."""
    with Job(work, "node0", "2:3", 3, 3, heartbeat) as job:
        job.wait_first_checkpoint()
        ranks = {i: job.nodes[i].ranks() for i in (1, 2)}
        lost_at = time.time()
        _stop_tree(job.nodes[0].proc)
        exits = Exits(ranks)
        job.wait_first_step(world=2)
        lead = next((i for i in (1, 2) if job.nodes[i].lines.first("takes over as the coordinator")), None)
        if lead is None:
            raise RuntimeError("attempt 1 ran, but no survivor said it took over")
        lines = job.nodes[lead].lines
        noticed, _ = _wait(lambda: lines.first("lost contact with node 0"), 10, "the loss line")
        _, attempt_line = _wait(lambda: lines.first("after losing node 0)"), 10, "the attempt line")
        takeover = _seconds(attempt_line, "(", " s after losing node 0")
        stopped = _wait(lambda: exits.at.get(lead), 10, "the new coordinator's ranks to exit")
        return job.after(lost_at, noticed, takeover, stopped - noticed)


def _on_sigterm(signum, frame) -> None:
    sys.exit(128 + signum)  # unwinds through every Job, which ends its launchers and ranks


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", choices=["lost", "node0", "all"], default="all")
    p.add_argument("--quick", action="store_true", help="lost: only the killed launcher, not the frozen node")
    p.add_argument("--heartbeat-timeout", type=float, default=10.0)
    args = p.parse_args()
    signal.signal(signal.SIGTERM, _on_sigterm)
    cases = []
    if args.case in ("lost", "all"):
        cases += ["killed"] if args.quick else ["killed", "frozen"]
    if args.case in ("node0", "all"):
        cases.append("node0")
    results = {}
    with tempfile.TemporaryDirectory(prefix="elastic-bench-") as tmp:
        for how in cases:
            if how == "node0":
                results[how] = run_node0(args.heartbeat_timeout, Path(tmp))
            else:
                results[how] = run_lost(how, args.heartbeat_timeout, Path(tmp))
    print(f"{'seconds':<16}" + "".join(f"{how:>10}" for how in cases))
    for phase in PHASES:
        print(f"{phase:<16}" + "".join(f"{results[how][phase]:>10.2f}" for how in cases))
    for how, r in results.items():
        after = r["total"] - r["detection"]
        name = "node 0 killed" if how == "node0" else f"node {how}"
        rows = [
            (f"{name}: detection", r["detection"], args.heartbeat_timeout),
            (f"{name}: detection to first step", after, AFTER_DETECTION_GOAL_S),
        ]
        for case, ours, baseline in rows:
            line = {"benchmark": "elastic", "case": case, "ours": round(ours, 3), "baseline": baseline,
                    "unit": "s", "ratio": round(ours / baseline, 3), "goal": 1.0}  # fmt: skip
            print("RESULT " + json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
