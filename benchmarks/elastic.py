"""Elastic jobs: how long a change of nodes holds training up, resized in place or by a restart.

Node launchers on loopback train the example CIFAR ResNet (``examples/resnet/cifar_resnet.py``,
HorovodTrainer, one rank per node) as ``--short`` does (ResNet-8: ``-n 1``) but for 100 epochs, as
``--short`` ends after 5, before a joining node is ready. A node is lost or joins a few steps into the
second epoch (its first checkpoint saved). A callback added to every rank records when its steps end
and, at its first step after each regroup in place, the regroup's phases (``trainer.resize.last``);
the launchers' stderr lines give the rest. Every run also shows, in brackets (not counted), rank 0's
median step at the new size (over its 10 steps after the first), for scale.

Case ``lost``: two nodes (``--nnodes 1:2``); node 1 is lost: its launcher and ranks are killed
(SIGKILL: its connection closes) or, without ``--quick``, frozen (SIGSTOP of its every process: it
goes silent). Measured on node 0 down to world size 1, once with ``--resize in-place`` and once with
``--resize restart``. Both start with detection: until node 0's launcher reports the node lost
(against ``--heartbeat-timeout``). In place, then:

- plan: until the coordinator sent the plan (what its "resized in place" line says);
- until regroup: until rank 0 starts to regroup (its step fails; it takes the plan);
- reinit, vote, variables, state, input: the regroup's phases, as the rank timed them;
- first step: until the first step at the new size ends.

By a restart, then: stop (until every rank of node 0 is stopped: SIGUSR1, 5 s to answer, then
SIGTERM and SIGKILL), rendezvous (until the next attempt is planned), restart (until the new rank's
Python starts), checkpoint load (until training is about to begin: TensorFlow import, graph, session,
restore) and first step.

Case ``joined``: two nodes (``--nnodes 2:3``) train and a third launcher joins. Measured is the pause
of rank 0: from the end of its last step before the change to the end of its first step after, minus
one typical step (the median of its steps before the join) and minus an epoch's end when one falls in
between (its callbacks: checkpoint, validation). In place, the joiner's start-up (until its rank
waits for the plan), the coordinator's plan and rank 0's recent steps (the median of its last 20,
slowed by the joiner's start-up) are in brackets: training goes on meanwhile; the pause is until
regroup, the regroup's phases and the first step. By a restart (not with ``--quick``): stop,
rendezvous, restart, checkpoint load and first step.

Case ``node0``: three nodes (``--nnodes 2:3``, every one listed in ``--master``); node 0, the
coordinator, is killed with its ranks. In place needs the chief to survive, so this takes the
failover restart: measured on the survivor that takes over (the lowest node id left), down to world
size 2: detection (until it reports node 0 lost); stop (until its own ranks have exited, seen from
outside); rendezvous (the rest of the takeover: finding the next coordinator, the quorum, the
rendezvous; stop and rendezvous add up to the "X s after losing node 0" it prints); then restart,
checkpoint load and first step as above.

Goals: a killed node resized in place, lost to first step under 2 s; a join in place pauses the others
under 1 s; by a restart (issue 21), detection within the heartbeat timeout and everything after it
under 20 s. ``--quick`` runs the killed node both ways and the join in place. A run that fails is
reported (its launchers' and ranks' last lines on stderr), the others go on, and the exit code is 1.
Usage: ``python benchmarks/elastic.py [--case lost|joined|node0|all] [--quick] [--heartbeat-timeout S]
[--no-sync-bn]``.
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
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "resnet" / "cifar_resnet.py"
AFTER_DETECTION_GOAL_S = 20.0
IN_PLACE_LOST_GOAL_S = 2.0
IN_PLACE_PAUSE_GOAL_S = 1.0
IN_PLACE, RESTART = "in-place", "restart"
REGROUP_PHASES = ("reinit", "vote", "variables", "state", "input")
# Every row a table can have, in the order printed; a name in brackets is not part of the total.
ROWS = (
    "(joiner start-up)", "(join to plan)", "detection", "plan", "stop", "rendezvous", "restart",
    "checkpoint load", "until regroup", *REGROUP_PHASES, "first step", "(recent step)", "(step at new size)",
    "epoch end", "typical step", "pause", "total",
)  # fmt: skip

# Runs the example unchanged, with a callback that writes when this rank started, its world size, when
# training is about to begin (checkpoint restored), its steps (count, end, median of the last 20 at this
# size) and, at the first step after each regroup in place, the regroup's phases and the times around it.
WRAPPER = """
import json, os, runpy, statistics, sys, time
started = time.time()
out, attempt, rank = os.environ["ELASTIC_BENCH_OUT"], os.environ["RESTART_COUNT"], os.environ["RANK"]


def mark(what, value):
    path = os.path.join(out, f"{what}.{attempt}.{rank}")
    with open(path + ".tmp", "w") as f:
        json.dump(value, f)
    os.replace(path + ".tmp", path)


mark("start", started)
mark("world", int(os.environ["WORLD_SIZE"]))
from towerpack.trainer import Callback
from towerpack.trainer import config as train_config


class Timer(Callback):
    _chief_only = False

    def _setup_graph(self):
        self.steps, self.generation = 0, 0
        self.began = self.end = None  # when the step under way began, when the last one ended
        self.fresh = True  # no step yet in this epoch
        self.durations = []  # end to end, of two steps of one epoch and generation
        self.breaks = []  # [after_epoch, before_epoch]: the epoch ends' callbacks

    def _before_train(self):
        mark("loaded", time.time())

    def _after_epoch(self):
        self.breaks = self.breaks[-3:] + [[time.time(), None]]
        self.fresh = True

    def _before_epoch(self):
        if self.breaks and self.breaks[-1][1] is None:
            self.breaks[-1][1] = time.time()

    def _before_run(self, ctx):
        self.began = time.time()

    def _trigger_step(self):
        now = time.time()
        self.steps += 1
        if self.steps == 1:
            mark("first_step", now)
        typical = statistics.median(self.durations[-20:]) if self.durations else None
        resize = self.trainer.resize
        generation = resize.channel.generation if resize is not None else 0
        if generation != self.generation:
            self.generation = generation
            end = self.end or 0.0
            breaks = sum(b - a for a, b in self.breaks if b is not None and end <= a and b <= self.began)
            mark(f"regroup{generation}", dict(
                phases=resize.last, world=self.trainer.size, before=self.end, began=self.began, after=now,
                typical=typical, breaks=breaks, n=self.steps,
            ))
            self.durations = []  # steps at the new size from here
        elif not self.fresh:
            self.durations.append(now - self.end)
        self.end, self.fresh = now, False
        mark("step", dict(n=self.steps, at=now, typical=typical))


original = train_config.TrainConfig.__init__


def with_timer(self, *args, **kwargs):
    original(self, *args, **kwargs)
    self.callbacks.append(Timer())


train_config.TrainConfig.__init__ = with_timer
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@dataclass(frozen=True)
class Case:
    """One measured run: what happens to the nodes (``lost``: ``how``, ``joined``, ``node0``) and how the
    job takes the change (``resize``: ``in-place`` or ``restart``)."""

    kind: str
    resize: str
    how: str = ""

    @property
    def column(self) -> str:
        return "failover" if self.kind == "node0" else f"{self.how} {self.resize}".strip()


@dataclass(frozen=True)
class Setup:
    """What every run of one invocation shares: the launchers' heartbeat timeout, the example's extra
    arguments, the directory that holds each run's files."""

    heartbeat: float
    example_args: tuple[str, ...]
    work: Path


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
    """One node's launcher, in a session of its own (as on a machine of its own), and its stderr (its
    lines and its ranks' logs)."""

    def __init__(self, argv: list[str], env: dict, cwd: Path, wrapper: Path):
        self.wrapper = str(wrapper)
        self.started = time.time()
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


def _read(path: Path):
    try:
        return json.loads(path.read_text())
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


def _freeze_tree(proc: subprocess.Popen) -> None:
    """SIGSTOP a launcher and every process under it: the node goes silent without closing a socket."""
    launcher = psutil.Process(proc.pid)
    for p in [launcher, *launcher.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            p.suspend()


def _sweep(marker: str) -> None:
    """SIGKILL whatever rank process of this run escaped its launcher (a frozen or killed tree)."""
    for proc in psutil.process_iter():
        if marker in _cmdline(proc):
            with contextlib.suppress(psutil.Error):
                proc.kill()


class Job:
    """Node launchers of one elastic job on loopback addresses 127.0.0.1, .2, ..., training the example
    through the timing wrapper; ``with`` ends them and every rank. ``masters`` of the first nodes are
    listed in ``--master``; :meth:`add_node` starts one more launcher later."""

    def __init__(self, setup: Setup, case: Case, nnodes: str, n: int, masters: int):
        self.out = setup.work / f"{case.kind}-{case.how}-{case.resize}"
        self.out.mkdir()
        self.wrapper = setup.work / "timed_rank.py"
        self.wrapper.write_text(WRAPPER)
        self.setup, self.nnodes, self.resize = setup, nnodes, case.resize
        self.master = ",".join(f"{a}:{_free_port(a)}" for a in map(_addr, range(masters)))
        self.env = dict(
            os.environ,
            ELASTIC_BENCH_OUT=str(self.out),
            TOWERPACK_LAUNCH_SECRET="elastic-benchmark-secret",
            TF_CPP_MIN_LOG_LEVEL="2",
        )
        self.nodes: list[Node] = []
        for _ in range(n):
            self.add_node()

    def add_node(self) -> Node:
        """Start the launcher of the next node id, at the next loopback address."""
        rank = len(self.nodes)
        argv = [
            sys.executable, "-m", "towerpack.launcher", "--nnodes", self.nnodes, "--node-rank", str(rank),
            "--master", self.master, "--node-addr", _addr(rank), "--np", "1", "--backend", "horovod",
            "--resize", self.resize, "--heartbeat-timeout", str(self.setup.heartbeat),
            str(self.wrapper), str(EXAMPLE), "-n", "1", "--epochs", "100",
            "--logroot", str(self.out / "train_log"), *self.setup.example_args,
        ]  # fmt: skip
        self.nodes.append(Node(argv, self.env, self.setup.work, self.wrapper))
        return self.nodes[-1]

    def mark(self, what: str, attempt: int = 0, rank: int = 0):
        return _read(self.out / f"{what}.{attempt}.{rank}")

    def said(self, text: str) -> list[str]:
        """The lines of every launcher that hold ``text``."""
        return [line for node in self.nodes for _, line in node.lines.lines if text in line]

    def wait_first_checkpoint(self, steps_after: int = 3) -> None:
        """Until the first epoch's checkpoint is saved and rank 0 has made ``steps_after`` steps of the
        next epoch: a change then comes mid-epoch, away from the epoch end's callbacks."""
        checkpoint = self.out / "train_log" / "resnet" / "checkpoint"
        _wait(lambda: checkpoint.exists() and self.mark("step"), 900, "the first epoch's checkpoint")
        n = self.mark("step")["n"] + steps_after
        _wait(lambda: self.mark("step")["n"] >= n, 60, f"step {n}")

    def wait_first_step(self, world: int) -> None:
        """Until rank 0 of attempt 1 (a restart) ends its first step, at world size ``world``."""
        _wait(lambda: self.mark("first_step", 1), 300, f"the first step at world size {world}")
        if self.mark("world", 1) != world:
            raise RuntimeError(f"attempt 1 ran at world size {self.mark('world', 1)}, not {world}")

    def wait_regroup(self, world: int) -> dict:
        """Rank 0's record of its first step after the first regroup in place, to ``world`` ranks; a
        clear error when the job restarted instead (with what the launcher said about it)."""
        seen = lambda: self.mark("regroup1") or self.mark("start", 1)
        got = _wait(seen, 300, f"a regroup to {world} ranks")
        if not isinstance(got, dict):
            why = " / ".join(self.said("resiz")) or "no launcher said why"
            errors = self.said("Error: ")  # as a rank's traceback ends
            if errors:
                why += f" (the last error a rank printed: {errors[-1]})"
            raise RuntimeError(f"the job restarted at attempt 1 instead of resizing in place: {why}")
        if got["world"] != world:
            raise RuntimeError(f"the regroup made {got['world']} ranks, not {world}")
        return got

    def step_at_new_size(self, attempt: int, after_step: int = 0, steps: int = 10) -> dict:
        """Rank 0's median step at the size it went on with: over ``steps`` steps after step ``after_step``
        of ``attempt``."""
        n = after_step + steps + 1  # the first step after a change is not typical
        _wait(lambda: (self.mark("step", attempt) or {}).get("n", 0) >= n, 120, f"step {n} at the new size")
        return {"(step at new size)": self.mark("step", attempt)["typical"]}

    def restarted(self, since: float, noticed: float, planned: float, stopping: float) -> dict:
        """The phases of a restart from ``since``, given when the change was noticed, and how many seconds
        after that the ranks were stopped (``stopping``) and the next attempt planned (``planned``)."""
        started, loaded, first = (self.mark(what, 1) for what in ("start", "loaded", "first_step"))
        return {
            "stop": noticed + stopping - since, "rendezvous": planned - stopping,
            "restart": started - (noticed + planned), "checkpoint load": loaded - started,
            "first step": first - loaded,
        }  # fmt: skip

    def in_place(self, regroup: dict, since: float) -> dict:
        """The phases of rank 0's regroup in place from ``since`` to the end of its first step after."""
        phases = {k: regroup["phases"][k] for k in REGROUP_PHASES}
        begins = regroup["began"] - sum(phases.values())  # the rest of the regroup's time counts here
        return {"until regroup": begins - since, **phases, "first step": regroup["after"] - regroup["began"]}

    def __enter__(self) -> Job:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        said = "\n".join(f"--- node {i}:\n{node.lines.tail()}" for i, node in enumerate(self.nodes))
        for node in self.nodes:
            _stop_tree(node.proc)
        _sweep(str(self.wrapper))
        if isinstance(exc, TimeoutError | RuntimeError):
            raise RuntimeError(f"{exc}; the launchers' last lines:\n{said}") from exc


def _addr(node: int) -> str:
    return f"127.0.0.{node + 1}"


def _plan_seconds(coordinator: Node, world: int) -> float:
    """Seconds from the change to the plan of the resize in place to ``world`` ranks, as the coordinator
    says once every rank has regrouped."""
    text = f"resized in place to world size {world} "
    _, line = _wait(lambda: coordinator.lines.first(text), 10, "the coordinator's resize line")
    return _seconds(line, "the plan went out ", " s after")


def run_lost(case: Case, setup: Setup) -> dict:
    """Node 1 of two killed or frozen, seen from node 0."""
    with Job(setup, case, "1:2", 2, 1) as job:
        node0, node1 = job.nodes
        job.wait_first_checkpoint()
        lost_at = time.time()
        (_stop_tree if case.how == "killed" else _freeze_tree)(node1.proc)
        if case.resize == IN_PLACE:
            regroup = job.wait_regroup(world=1)
            plan = _plan_seconds(node0, world=1)
        else:
            job.wait_first_step(world=1)
        noticed, _ = _wait(lambda: node0.lines.first("lost ("), 10, "the loss line")
        if case.resize == IN_PLACE:
            phases = {"plan": plan, **job.in_place(regroup, noticed + plan)}
            end, typical = regroup["after"], job.step_at_new_size(0, regroup["n"])
        else:
            _, attempt_line = _wait(lambda: node0.lines.first("attempt 1 "), 10, "the attempt line")
            stopping = _seconds(attempt_line, "stopping took ", " s")
            rendezvous = _seconds(attempt_line, "rendezvous ", " s")
            phases = job.restarted(noticed, noticed, stopping + rendezvous, stopping)
            end, typical = job.mark("first_step", 1), job.step_at_new_size(1)
        return {"detection": noticed - lost_at, **phases, **typical, "total": end - lost_at}


def run_joined(case: Case, setup: Setup) -> dict:
    """A third node joins two that train; the pause of rank 0 (see the module)."""
    with Job(setup, case, "2:3", 2, 1) as job:
        node0 = job.nodes[0]
        job.wait_first_checkpoint()
        typical = job.mark("step")["typical"]  # rank 0's median step before the join
        joiner = job.add_node()
        if case.resize == IN_PLACE:
            regroup = job.wait_regroup(world=3)
            before, after, breaks = regroup["before"], regroup["after"], regroup["breaks"]
            phases = {
                "(joiner start-up)": job.mark("loaded", 0, 2) - joiner.started,
                "(join to plan)": _plan_seconds(node0, world=3),
                **job.in_place(regroup, before),
                "(recent step)": regroup["typical"],
                **job.step_at_new_size(0, regroup["n"]),
            }
        else:
            job.wait_first_step(world=3)
            at, attempt_line = _wait(lambda: node0.lines.first("attempt 1 "), 10, "the attempt line")
            stopping = _seconds(attempt_line, "stopping took ", " s")
            rendezvous = _seconds(attempt_line, "rendezvous ", " s")
            before, after, breaks = job.mark("step", 0)["at"], job.mark("first_step", 1), 0.0
            noticed = at - stopping - rendezvous  # when the coordinator took the join
            phases = {
                **job.restarted(before, noticed, stopping + rendezvous, stopping),
                **job.step_at_new_size(1),
            }
        pause = after - before - breaks - typical
        epoch_end = {"epoch end": -breaks} if breaks else {}
        return {**phases, **epoch_end, "typical step": -typical, "pause": pause}


def run_node0(case: Case, setup: Setup) -> dict:
    """Node 0 of three killed, seen from the survivor that takes over."""
    with Job(setup, case, "2:3", 3, 3) as job:
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
        phases = {**job.restarted(noticed, noticed, takeover, stopped - noticed), **job.step_at_new_size(1)}
        return {"detection": noticed - lost_at, **phases, "total": job.mark("first_step", 1) - lost_at}


RUNS = {"lost": run_lost, "joined": run_joined, "node0": run_node0}


def cases_of(which: str, quick: bool) -> list[Case]:
    cases = []
    if which in ("lost", "all"):
        for how in ["killed"] if quick else ["killed", "frozen"]:
            cases += [Case("lost", IN_PLACE, how), Case("lost", RESTART, how)]
    if which in ("joined", "all"):
        cases += [Case("joined", IN_PLACE)] if quick else [Case("joined", IN_PLACE), Case("joined", RESTART)]
    if which in ("node0", "all") and not quick:
        cases.append(Case("node0", IN_PLACE))  # offered, but losing the chief restarts the job
    return cases


def print_table(title: str, columns: dict[str, dict]) -> None:
    """Seconds of each phase (rows) of each run (columns); "-" where a run has no such phase."""
    rows = [r for r in ROWS if any(r in c for c in columns.values())]
    print(f"\n{title + ' (seconds)':<22}" + "".join(f"{name:>16}" for name in columns))
    for row in rows:
        cells = (f"{c[row]:>16.2f}" if row in c else f"{'-':>16}" for c in columns.values())
        print(f"{row:<22}" + "".join(cells))


def results_of(case: Case, r: dict, heartbeat: float) -> list[tuple[str, float, float]]:
    """The RESULT rows of a run: (case name, ours, the goal it is measured against)."""
    if case.kind == "joined":
        goal = IN_PLACE_PAUSE_GOAL_S if case.resize == IN_PLACE else AFTER_DETECTION_GOAL_S
        return [(f"node joined, {case.resize}: pause of the others", r["pause"], goal)]
    if case.resize == IN_PLACE and case.how == "killed":
        return [("node killed, in place: lost to first step", r["total"], IN_PLACE_LOST_GOAL_S)]
    # the restart's names are those from before resizes in place, so that figures compare over time
    if case.kind == "node0":
        name = "node 0 killed"
    else:
        name = f"node {case.how}" + (", in place" if case.resize == IN_PLACE else "")
    return [
        (f"{name}: detection", r["detection"], heartbeat),
        (f"{name}: detection to first step", r["total"] - r["detection"], AFTER_DETECTION_GOAL_S),
    ]


def _on_sigterm(signum, frame) -> None:
    sys.exit(128 + signum)  # unwinds through every Job, which ends its launchers and ranks


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", choices=["lost", "joined", "node0", "all"], default="all")
    p.add_argument(
        "--quick", action="store_true",
        help="only the killed node (in place and by a restart) and the join in place",
    )  # fmt: skip
    p.add_argument("--heartbeat-timeout", type=float, default=10.0)
    p.add_argument(
        "--no-sync-bn", action="store_true",
        help="train the example with --no-sync-bn (each rank's BatchNorm uses its own batch)",
    )  # fmt: skip
    args = p.parse_args()
    signal.signal(signal.SIGTERM, _on_sigterm)
    results: dict[Case, dict] = {}
    failed: dict[Case, str] = {}
    with tempfile.TemporaryDirectory(prefix="elastic-bench-") as tmp:
        setup = Setup(args.heartbeat_timeout, ("--no-sync-bn",) if args.no_sync_bn else (), Path(tmp))
        for case in cases_of(args.case, args.quick):
            print(f"running {case.kind}: {case.column}", file=sys.stderr, flush=True)
            try:
                results[case] = RUNS[case.kind](case, setup)
            except RuntimeError as e:  # the next case may still work; this one is reported below
                print(f"{case.kind} {case.column} failed: {e}", file=sys.stderr, flush=True)
                failed[case] = str(e).split("; the launchers' last lines")[0]
    for kind in RUNS:
        columns = {case.column: r for case, r in results.items() if case.kind == kind}
        if columns:
            print_table(kind, columns)
    print()
    for case, why in failed.items():
        print(f"FAILED {case.kind} {case.column}: {why}")
    for case, r in results.items():
        for name, ours, baseline in results_of(case, r, args.heartbeat_timeout):
            line = {"benchmark": "elastic", "case": name, "ours": round(ours, 3), "baseline": baseline,
                    "unit": "s", "ratio": round(ours / baseline, 3), "goal": 1.0}  # fmt: skip
            print("RESULT " + json.dumps(line))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
