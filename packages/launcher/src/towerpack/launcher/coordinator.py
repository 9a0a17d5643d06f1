"""The launcher that owns a job: sets it up, runs every attempt, stops it, and reports how it ended."""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import signal
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass

from towerpack.launcher import job_secret, net, probe, ssh, watchdog
from towerpack.launcher.admission import ControlServer
from towerpack.launcher.console import say
from towerpack.launcher.errors import USAGE_EXIT, UsageError
from towerpack.launcher.events import (
    NodeLost,
    NodeProbed,
    NodeSignalled,
    NodeStopped,
    SignalReceived,
    TaskEnded,
)
from towerpack.launcher.gloo_store import GlooStore
from towerpack.launcher.group import FAILURE_GRACE_S
from towerpack.launcher.nodes import LocalNode, NodeState, RemoteNode, local_info
from towerpack.launcher.plan import Backend, JobConfig, build_tasks, ports_needed
from towerpack.launcher.ports import HeldPorts
from towerpack.launcher.probe import PROBE_TIMEOUT_S, ProbeListener
from towerpack.launcher.protocol import HEARTBEAT_INTERVAL_S, ProbeTarget, Welcome
from towerpack.launcher.results import (
    Failure,
    FailureKind,
    JobState,
    RunResult,
    clear_error_file,
    write_error_file,
)
from towerpack.launcher.signals import Received, as_events
from towerpack.launcher.signals import name as signal_name
from towerpack.launcher.spec import LaunchSpec, Mode
from towerpack.launcher.tagging import terminate
from towerpack.launcher.tasks import StopRequest, TaskKind


class StartupError(Exception):
    """The job could not start (a node did not join, ssh failed): exit code 1 unless told otherwise."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class _Outcome:
    """Why an attempt ended: a failure, a signal (from ``origin``), or neither (every worker succeeded)."""

    failure: Failure | None = None
    signal: int | None = None
    origin: str = ""  # "": this launcher


@dataclass(frozen=True)
class _Stopped:
    """What stopping every node brought: failures reported late, a signal, SIGKILLed workers."""

    late: tuple[Failure, ...] = ()
    signal: int | None = None
    killed: int = 0


class Coordinator:
    """The launcher that owns a job: on one machine, in ssh mode, or node 0 of a per-node job.

    Setup: this machine's node(s) with their ports held, the Gloo store (backend horovod) and, with
    several nodes, the control server; ssh agents are started, every other node must join within
    ``--start-timeout`` and prove the job's secret, and every node must reach every other one.

    Each attempt: plan every task, start them on all nodes, then react to events (``_watch``) until
    every worker succeeded, a task failed, a node was lost (its connection ended, or no heartbeat
    for ``--heartbeat-timeout``), or a signal came, here or on any node. Then ``_stop_all``: a signal
    is passed on to every worker, which gets ``--grace-period`` seconds before SIGKILL (a second
    Ctrl-C ends the wait); after a failure everything gets SIGTERM and, 3 s later, SIGKILL.

    A failure restarts the job while ``--max-restarts`` allows; a signal or a lost node never does.
    The outcome is a ``RunResult``: its summary is printed (the earliest failure first, as the root
    cause), the ``--error-file`` written, every node told the exit code, which is returned.
    """

    def __init__(self, spec: LaunchSpec):
        self.spec = spec
        self.tag = f"{spec.job_id}-{uuid.uuid4().hex[:8]}"
        self.events: queue.SimpleQueue = queue.SimpleQueue()
        self.received = Received()
        self.nodes: list[LocalNode | RemoteNode] = []
        self.ssh_agents: list[ssh.SshAgent] = []
        self.server: ControlServer | None = None
        self.store: GlooStore | None = None
        self.listeners: list[ProbeListener] = []
        self.welcome = welcome_for(spec)

    # -- running ----------------------------------------------------------------------------------------
    def run(self) -> int:
        clear_error_file(self.spec.error_file)
        dog = watchdog.start(self.tag)
        try:
            with as_events(self.events) as self.received:
                return self.serve()
        finally:
            self.close()
            watchdog.stop(dog)

    def serve(self) -> int:
        """Set the job up, run it, report how it ended and tell every node; returns the exit code."""
        try:
            self._setup()
            result = self._supervise()
        except StartupError as exc:
            result = RunResult(JobState.NOT_STARTED, exc.code, message=str(exc))
        for line in result.summary():
            say(line)
        write_error_file(self.spec.error_file, result, self.spec.job_id)
        for node in self.nodes:
            node.finish(result.exit_code)
        return result.exit_code

    def _job_config(self) -> JobConfig:
        """What every attempt's plan needs to know of the job, besides its nodes."""
        spec = self.spec
        return JobConfig(
            backend=spec.backend,
            n_ps=spec.n_ps,
            store=self.store.address(spec.master_addr) if self.store else None,
            master_port=spec.rank_master_port,
            max_restarts=spec.max_restarts,
            job_id=spec.job_id,
        )

    def _supervise(self) -> RunResult:
        spec = self.spec
        infos = [n.info for n in self.nodes]
        cfg = self._job_config()
        for attempt in range(spec.max_restarts + 1):
            if self.store:
                self.store.reset(sum(n.slots for n in infos))
            plan = build_tasks(infos, cfg, attempt)
            n_tasks = sum(len(t) for t in plan.values())
            for node in self.nodes:
                node.start(plan[node.info.node], attempt)
            workers = sum(t.kind is TaskKind.WORKER for tasks in plan.values() for t in tasks)
            outcome = self._watch(workers, attempt)
            if outcome.signal:
                stop = self._stop_all(StopRequest(outcome.signal, spec.grace_period), attempt)
            else:
                stop = self._stop_all(StopRequest(None, FAILURE_GRACE_S), attempt)
            sig = outcome.signal or stop.signal
            if sig:
                origin = outcome.origin if outcome.signal else ""
                return RunResult(
                    JobState.STOPPED, 128 + sig, signal=sig, signal_origin=origin, killed=stop.killed
                )
            if outcome.failure is None:
                return RunResult(JobState.SUCCEEDED, 0)
            # Reports arrive out of order (output still draining, other nodes): the earliest is the cause.
            failures = sorted(_unique([outcome.failure, *stop.late]), key=self._when)
            root = failures[0]
            lost = [n.info for n in self.nodes if n.state is NodeState.LOST]
            if attempt < spec.max_restarts and not lost:
                say(
                    f"{root.who()} failed ({root.reason}); restarting the job "
                    f"(restart {attempt + 1} of {spec.max_restarts})"
                )
                continue
            others = n_tasks - (len(plan[root.node]) if root.kind is FailureKind.NODE_LOST else 1)
            result = RunResult(
                JobState.FAILED, root.exit_status, root_cause=root, others=tuple(failures[1:]), stopped=others
            )
            if attempt < spec.max_restarts:
                names = ", ".join(f"node {n.node} ({n.hostname})" for n in lost)
                note = f"not restarting: lost {names}, whose processes only its own launcher can start"
                return dataclasses.replace(result, notes=(note,))
            return result
        raise AssertionError("not reached")

    def _watch(self, workers: int, attempt: int) -> _Outcome:
        """Wait until every worker succeeded, a task failed, a node was lost, or a signal came."""
        left = workers
        while True:
            event = self.events.get()
            if isinstance(event, SignalReceived):
                return _Outcome(signal=event.signal)
            if isinstance(event, NodeSignalled):
                return _Outcome(signal=event.signal, origin=self._node_name(event.node))
            failure = self._failure(event, attempt)
            if failure:
                return _Outcome(failure=failure)
            if (
                isinstance(event, TaskEnded)
                and event.exit.attempt == attempt
                and event.exit.kind is TaskKind.WORKER
            ):
                left -= 1
                if left == 0:
                    return _Outcome()

    def _failure(self, event, attempt: int) -> Failure | None:
        """The failure an event reports, if it is one: a task of this attempt failed, or a node is lost."""
        if isinstance(event, TaskEnded) and event.exit.attempt == attempt and event.exit.code != 0:
            return Failure.of_exit(event.node, event.exit)
        if isinstance(event, NodeLost):
            return Failure.node_lost(event.node, self._host(event.node), event.why, event.last_heard)
        return None

    def _stop_all(self, request: StopRequest, attempt: int) -> _Stopped:
        """Stop every node at once; meanwhile collect late failures and signals (a Ctrl-C hurries)."""

        nodes = list(self.nodes)
        for node in nodes:  # all asked first: with hundreds of nodes a thread for each is slower
            node.request_stop(request)

        def collect() -> None:
            for node in nodes:
                self.events.put(NodeStopped(node.info.node, node.wait_stopped()))

        pending = {n.info.node for n in nodes}
        threading.Thread(target=collect, daemon=True).start()
        late, sig, killed = [], None, 0
        while pending:
            event = self.events.get()
            if isinstance(event, NodeStopped):
                pending.discard(event.node)
                killed += event.killed
            elif isinstance(event, SignalReceived):
                sig = sig or event.signal
                if event.signal == signal.SIGINT:
                    for node in self.nodes:
                        node.hurry()
            elif isinstance(event, NodeSignalled):
                sig = sig or event.signal
            elif failure := self._failure(event, attempt):
                late.append(failure)
        return _Stopped(tuple(late), sig, killed)

    # -- setting up -------------------------------------------------------------------------------------
    def _setup(self) -> None:
        spec = self.spec
        remote: dict[int, object] = {}
        multi = spec.mode is not Mode.SINGLE
        if spec.mode is Mode.SINGLE:
            self.nodes.append(self._local(0, spec.master_addr, spec.slots, spec.cuda, multi))
        elif spec.mode is Mode.NODE:
            addr = spec.node_addr or net.source_address(spec.master_addr)
            self.nodes.append(self._local(0, addr, spec.slots, spec.cuda, multi))
            remote = {r: None for r in range(1, spec.nnodes)}
        else:
            for node, hs in enumerate(spec.hosts):
                if not net.is_local(hs.host):
                    remote[node] = hs
                    continue
                # "localhost" in a cluster spec would point the other hosts at themselves.
                addr = spec.node_addr or (spec.master_addr if net.is_loopback(hs.host) else hs.host)
                cuda = _first(spec.cuda, hs.slots, hs.host)
                self.nodes.append(self._local(node, addr, hs.slots, cuda, multi))
        if spec.backend is Backend.HOROVOD:
            token = job_secret.store_token(spec.secret)
            self.store = GlooStore(spec.master_addr, token, world=spec.nnodes * spec.slots)
        if remote:
            self._join(remote)
        self._check_reachable()

    def _local(self, node: int, addr: str, slots: int, cuda, multi: bool) -> LocalNode:
        held = HeldPorts(addr, ports_needed(node, slots, self.spec.n_ps, self.spec.nnodes))
        listener = ProbeListener(addr) if multi else None
        if listener:
            self.listeners.append(listener)
        info = local_info(self.spec, node, addr, slots, cuda, held, listener.port if listener else None)
        spec = self.spec
        return LocalNode(info, list(spec.argv), self.tag, spec.output, self.events, spec.cpu_bind, held)

    def _join(self, remote: dict[int, object]) -> None:
        spec = self.spec
        try:
            self.server = ControlServer(
                spec.master_addr,
                spec.master_port or 0,
                spec.secret,
                spec.nnodes,
                set(remote),
                spec.n_ps,
                self.welcome,
                self.events,
            )
        except OSError as exc:
            raise StartupError(
                f"cannot listen on --master {spec.master_addr}:{spec.master_port}: {exc.strerror}", USAGE_EXIT
            ) from None
        for node, hs in remote.items():
            if hs is not None:
                self.ssh_agents.append(
                    ssh.SshAgent(spec, node, hs, self.server.port, f"{self.tag}.ssh", self.events)
                )
        if spec.mode is Mode.NODE:
            where = net.host_port(spec.master_addr, self.server.port)
            say(f"node 0 waiting for {spec.nnodes - 1} more node(s) on {where}")
        missing = self.server.wait_all(spec.start_timeout, self._abort_startup)
        if missing:
            raise StartupError(
                f"node(s) {', '.join(map(str, missing))} did not join within {spec.start_timeout:g} s"
            )
        for agent in self.ssh_agents:
            agent.show_output()
        self.nodes.extend(self.server.joined.values())
        self.nodes.sort(key=lambda n: n.info.node)

    def _abort_startup(self) -> None:
        """Called while waiting for the nodes: give up on a signal or on an ssh agent that died."""
        sig = self.received.last
        if sig:
            raise StartupError(f"received {signal_name(sig)} while starting", 128 + sig)
        joined = {n.info.addr for n in self.server.joined.values()}
        for agent in self.ssh_agents:
            problem = None if agent.host in joined else agent.failure()
            if not problem:
                continue
            if agent.proc.returncode == USAGE_EXIT:  # the agent refused its command line (a GPU id, ...)
                reason = problem.removeprefix("launch: error: ")
                raise StartupError(f"error: on host {agent.host}: {reason}", USAGE_EXIT)
            raise StartupError(f"could not start the agent on {agent.host} over ssh: {problem}")

    def _check_reachable(self) -> None:
        """Every node connects to other nodes' probe ports (``probe.peers``); any failure stops the start."""
        if len(self.nodes) < 2:
            return
        targets = [ProbeTarget(n.info.node, n.info.addr, n.info.probe_port) for n in self.nodes]
        for i, node in enumerate(self.nodes):
            node.probe([targets[j] for j in probe.peers(i, len(targets))])
        waiting, problems = {n.info.node for n in self.nodes}, []
        deadline = time.monotonic() + PROBE_TIMEOUT_S + 10.0
        while waiting:
            try:
                event = self.events.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise StartupError(
                    f"node(s) {sorted(waiting)} did not answer the reachability check"
                ) from None
            if isinstance(event, NodeProbed):
                waiting.discard(event.node)
                problems += [f"{self._node_name(event.node)} cannot reach {p}" for p in event.problems]
            elif isinstance(event, (SignalReceived, NodeSignalled)):
                raise StartupError(f"received {signal_name(event.signal)} while starting", 128 + event.signal)
            elif isinstance(event, NodeLost):
                raise StartupError(f"{self._node_name(event.node)} was lost while starting: {event.why}")
        for listener in self.listeners:
            listener.close()
        if problems:
            hint = "check firewalls, or pick the address with --network-interface or --node-addr"
            raise StartupError("; ".join(problems) + f" ({hint})")

    def close(self) -> None:
        """Release what the job held: ssh agents, listeners, the control server, the store, ports."""
        for agent in self.ssh_agents:
            with contextlib.suppress(subprocess.TimeoutExpired):
                agent.proc.wait(timeout=10)
        if self.ssh_agents:
            terminate(f"{self.tag}.ssh", grace=2.0)
        for listener in self.listeners:
            listener.close()
        if self.server:
            self.server.close()
        if self.store:
            self.store.close()
        for node in self.nodes:
            if isinstance(node, LocalNode):
                node.held.close()

    def _when(self, failure: Failure) -> float:
        """When a failure happened, for ordering. A lost node was last heard from at ``time``; its
        last heartbeat may have been on its way for up to an interval, and a node does not go silent
        because a rank elsewhere failed: it counts as lost that much earlier."""
        if failure.kind is FailureKind.NODE_LOST:
            return failure.time - self.welcome.heartbeat_interval
        return failure.time

    def _host(self, node: int) -> str:
        return next((n.info.hostname for n in self.nodes if n.info.node == node), f"node {node}")

    def _node_name(self, node: int) -> str:
        return f"node {node} ({self._host(node)})"


def welcome_for(spec: LaunchSpec) -> Welcome:
    """The job settings a coordinator gives every joining agent."""
    interval = min(HEARTBEAT_INTERVAL_S, spec.heartbeat_timeout / 4)
    return Welcome(interval, spec.heartbeat_timeout, spec.grace_period)


def _first(cuda, slots: int, host: str):
    if cuda is not None and len(cuda) < slots:
        raise UsageError(f"host {host} has {slots} slots but --gpus gives only {len(cuda)} GPU(s)")
    return None if cuda is None else cuda[:slots]


def _unique(failures: list[Failure]) -> list[Failure]:
    """One failure per lost node (its connection and its ssh process may both report it)."""
    seen, out = set(), []
    for f in sorted(failures, key=lambda f: f.time):
        key = (f.node, None) if f.kind is FailureKind.NODE_LOST else (f.node, f.task)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out
