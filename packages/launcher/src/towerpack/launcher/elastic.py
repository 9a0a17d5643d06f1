"""The coordinator of an elastic job (``--nnodes MIN:MAX``): nodes may be lost or join while it runs,
and every change restarts the ranks at the new size from their last checkpoint."""

from __future__ import annotations

import dataclasses
import enum
import signal
import time
from dataclasses import dataclass

from towerpack.launcher import job_secret, net
from towerpack.launcher.admission import ControlServer, Problem, check_info
from towerpack.launcher.console import say
from towerpack.launcher.coordinator import Coordinator, StartupError, _unique
from towerpack.launcher.errors import USAGE_EXIT, Refusal
from towerpack.launcher.events import NodeJoined, NodeLost, NodeSignalled, SignalReceived, TaskEnded
from towerpack.launcher.gloo_store import GlooStore
from towerpack.launcher.group import FAILURE_GRACE_S
from towerpack.launcher.membership import (
    LOSS_GRACE_S,
    SETTLE_S,
    ChangeReason,
    MembershipChange,
    StartReason,
)
from towerpack.launcher.nodes import LocalNode, NodeState, RemoteNode, change_reason, local_info
from towerpack.launcher.plan import Backend, build_tasks, elastic_ports
from towerpack.launcher.ports import HeldPorts
from towerpack.launcher.probe import ProbeListener
from towerpack.launcher.protocol import Connection, Join
from towerpack.launcher.results import Failure, JobState, RunResult
from towerpack.launcher.signals import name as signal_name
from towerpack.launcher.spec import LaunchSpec
from towerpack.launcher.tasks import StopRequest, TaskKind


class ElasticServer(ControlServer):
    """Admits any agent of the same elastic job (same MIN:MAX, ``--ps`` and backend) while the job has
    fewer than MAX nodes, members and newcomers together; each gets the next node id (never reused)."""

    def __init__(self, spec: LaunchSpec, port: int, welcome, events):
        self.spec = spec  # before the server starts: its first agent may come at once
        self._next_id = 1
        super().__init__(spec.master_addr, port, spec.secret, spec.nnodes, set(), spec.n_ps, welcome, events)

    def live(self) -> list[RemoteNode]:
        """The agents still connected, in join order."""
        return [n for n in self.joined.values() if n.state is NodeState.REACHABLE]

    def _check(self, join: Join) -> Problem | None:
        spec, r = self.spec, self.spec.elastic
        if (join.min_nodes, join.max_nodes, join.n_ps, join.backend) != (
            r.min_nodes,
            r.max_nodes,
            spec.n_ps,
            spec.backend.value,
        ):
            theirs = f"{join.min_nodes}:{join.max_nodes}" if join.max_nodes else str(join.nnodes)
            return Refusal.MISMATCH, (
                f"node 0 runs --nnodes {r} --ps {spec.n_ps} --backend {spec.backend.value}, "
                f"this node --nnodes {theirs} --ps {join.n_ps} --backend {join.backend or '?'}"
            )
        if len(self.live()) + 1 >= r.max_nodes:
            return Refusal.FULL, f"the job already runs on its maximum of {r.max_nodes} node(s)"
        problem = check_info(join.info, elastic_ports(join.info.slots, spec.n_ps))
        return (Refusal.MISMATCH, problem) if problem else None

    def _admit(self, conn: Connection, join: Join) -> None:
        node, self._next_id = self._next_id, self._next_id + 1
        info = dataclasses.replace(join.info, node=node)
        self.joined[node] = RemoteNode(conn, info, self.events, self.welcome)
        self.events.put(NodeJoined(node))

    def wait_for(self, count: int, timeout: float, abort, settle: float = 0.0) -> int:
        """Wait up to ``timeout`` s until ``count`` agents are connected, then up to ``settle`` s more for
        others (up to MAX); returns how many are connected. ``abort()`` may raise to give up."""
        most = self.spec.elastic.max_nodes - 1
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.live()) < count and time.monotonic() < deadline:
                abort()
                self._cond.wait(0.1)
            if len(self.live()) >= count:
                deadline = time.monotonic() + settle
                while len(self.live()) < most and time.monotonic() < deadline:
                    abort()
                    self._cond.wait(0.1)
            return len(self.live())


class _Why(enum.Enum):
    """Why an attempt of an elastic job ended."""

    DONE = "done"  # every worker succeeded
    FAILURE = "failure"  # a task failed
    SIGNAL = "signal"  # a signal, here or on a node
    LOST = "lost"  # a member node was lost
    JOINED = "joined"  # a node joined


@dataclass(frozen=True)
class _End:
    why: _Why
    failure: Failure | None = None
    signal: int | None = None
    origin: str = ""


class ElasticCoordinator(Coordinator):
    """Node 0 of an elastic job.

    Start: wait for MIN nodes (``--start-timeout``), then ``SETTLE_S`` for more, then attempt 0. Each
    attempt numbers the member nodes densely in join order (node 0 first), so ``RANK``/``WORLD_SIZE``
    stay dense. A member lost: every rank gets SIGUSR1 (``LOSS_GRACE_S`` to checkpoint), then SIGTERM
    and SIGKILL; a node joining below MAX: SIGUSR1 with ``--grace-period``. Either way the next attempt
    runs on the nodes connected then, and does not use up ``--max-restarts``. A task failing with every
    node still answering is a failure, restarted at the same size while ``--max-restarts`` allows. Fewer
    than MIN nodes left: wait ``--rendezvous-timeout`` for joins, then fail naming the lost nodes.
    Node 0 runs here: when it goes, the agents see their coordinator lost and end the job.
    """

    def __init__(self, spec: LaunchSpec):
        super().__init__(spec)
        self.changes: list[MembershipChange] = []

    # -- setting up -------------------------------------------------------------------------------------
    def _setup(self) -> None:
        spec, r = self.spec, self.spec.elastic
        addr = spec.node_addr or net.source_address(spec.master_addr)
        held = HeldPorts(addr, elastic_ports(spec.slots, spec.n_ps))
        listener = ProbeListener(addr)
        self.listeners.append(listener)
        info = local_info(spec, 0, addr, spec.slots, spec.cuda, held, listener.port)
        self.nodes.append(
            LocalNode(info, list(spec.argv), self.tag, spec.output, self.events, spec.cpu_bind, held)
        )
        if spec.backend is Backend.HOROVOD:
            token = job_secret.store_token(spec.secret)
            self.store = GlooStore(spec.master_addr, token, world=r.max_nodes * spec.slots)
        try:
            self.server = ElasticServer(spec, spec.master_port or 0, self.welcome, self.events)
        except OSError as exc:
            raise StartupError(
                f"cannot listen on --master {spec.master_addr}:{spec.master_port}: {exc.strerror}", USAGE_EXIT
            ) from None
        where = net.host_port(spec.master_addr, self.server.port)
        say(f"node 0 of an elastic job ({r} nodes) waiting for other nodes on {where}")
        live = self.server.wait_for(r.min_nodes - 1, spec.start_timeout, self._abort_startup, SETTLE_S)
        if live < r.min_nodes - 1:
            raise StartupError(
                f"only {live + 1} node(s) of at least {r.min_nodes} joined within {spec.start_timeout:g} s"
            )
        self.nodes.extend(self._newcomers())
        self._check_reachable()

    def _newcomers(self) -> list[RemoteNode]:
        members = {n.info.node for n in self.nodes}
        return [n for n in self.server.live() if n.info.node not in members]

    # -- running ----------------------------------------------------------------------------------------
    def _supervise(self) -> RunResult:
        spec = self.spec
        cfg = self._job_config()
        attempt, restarts, reason, previous = 0, 0, StartReason.START, 0
        took = ""  # how long the last restart's stop and rendezvous took
        while True:
            members = list(self.nodes)
            dense = [dataclasses.replace(n.info, node=i) for i, n in enumerate(members)]
            world = sum(n.slots for n in dense)
            if self.store:
                self.store.reset(world)
            extra = {
                "TOWERPACK_RESTART_REASON": reason.value,
                "TOWERPACK_NNODES_RANGE": str(spec.elastic),
                "TOWERPACK_PREVIOUS_WORLD_SIZE": str(previous or world),
            }
            plan = build_tasks(dense, cfg, attempt, extra)
            if attempt:
                say(f"attempt {attempt} ({reason.value}): {len(members)} node(s), world size {world}{took}")
            for i, node in enumerate(members):
                node.start(plan[i], attempt)
            end = self._watch_elastic(world, attempt)
            ended = time.monotonic()
            stop = self._stop_all(self._stop_request(end), attempt)
            stopped = time.monotonic()
            sig = end.signal or stop.signal
            if sig:
                origin = end.origin if end.signal else ""
                return self._result(
                    RunResult(
                        JobState.STOPPED, 128 + sig, signal=sig, signal_origin=origin, killed=stop.killed
                    )
                )
            if end.why is _Why.DONE:  # a node lost after every worker succeeded changes nothing
                return self._result(RunResult(JobState.SUCCEEDED, 0))
            lost = [n for n in members if n.state is NodeState.LOST]
            if lost or end.why is _Why.JOINED:
                failed = self._regroup(lost, world)
                if failed:
                    return self._result(failed)
                attempt, reason, previous = attempt + 1, StartReason.MEMBERSHIP, world
                took = (
                    f" (stopping took {stopped - ended:.2f} s, rendezvous {time.monotonic() - stopped:.2f} s)"
                )
                continue
            failures = sorted(_unique([end.failure, *stop.late]), key=self._when)
            root = failures[0]
            if restarts < spec.max_restarts:
                restarts += 1
                say(
                    f"{root.who()} failed ({root.reason}); restarting the job "
                    f"(restart {restarts} of {spec.max_restarts})"
                )
                self._regroup([], world)  # nodes that joined meanwhile take part
                attempt, reason, previous = attempt + 1, StartReason.FAILURE, world
                took = ""
                continue
            stopped = sum(len(t) for t in plan.values()) - 1
            return self._result(
                RunResult(
                    JobState.FAILED,
                    root.exit_status,
                    root_cause=root,
                    others=tuple(failures[1:]),
                    stopped=stopped,
                )
            )

    def _watch_elastic(self, workers: int, attempt: int) -> _End:
        """Wait until every worker succeeded, a task failed, a member was lost, a node joined or a signal
        came. Events about nodes that are no longer (or not yet) members are left alone."""
        members = {n.info.node for n in self.nodes}
        left = workers
        while True:
            event = self.events.get()
            if isinstance(event, SignalReceived):
                return _End(_Why.SIGNAL, signal=event.signal)
            if isinstance(event, NodeSignalled) and event.node in members:
                return _End(_Why.SIGNAL, signal=event.signal, origin=self._node_name(event.node))
            if isinstance(event, NodeLost) and event.node in members:
                say(f"{self._node_name(event.node)} lost ({event.why}); stopping every rank")
                return _End(_Why.LOST)
            if isinstance(event, NodeJoined) and self._newcomers():
                who = ", ".join(self._node_name(n.info.node) for n in self._newcomers())
                say(f"{who} joined; asking every rank to checkpoint and stop, to restart at the larger size")
                return _End(_Why.JOINED)
            if not isinstance(event, TaskEnded) or event.exit.attempt != attempt:
                continue
            if event.exit.code != 0:
                return _End(_Why.FAILURE, failure=Failure.of_exit(event.node, event.exit))
            if event.exit.kind is TaskKind.WORKER:
                left -= 1
                if left == 0:
                    return _End(_Why.DONE)

    def _stop_request(self, end: _End) -> StopRequest:
        """A signal is passed on as it came; a membership change asks for a checkpoint first (SIGUSR1),
        briefly after a loss (ranks blocked on the dead peer will not answer); else SIGTERM."""
        grace = self.spec.grace_period
        if end.why is _Why.SIGNAL:
            return StopRequest(end.signal, grace)
        if end.why is _Why.JOINED:
            return StopRequest(signal.SIGUSR1, grace)
        if end.why is _Why.LOST:
            return StopRequest(signal.SIGUSR1, min(LOSS_GRACE_S, grace))
        return StopRequest(None, FAILURE_GRACE_S)

    def _regroup(self, lost: list[RemoteNode], world: int) -> RunResult | None:
        """Drop the lost members, take in the newcomers (recording each change), and wait for nodes when
        fewer than MIN are left; returns the failure when they do not come."""
        spec, r = self.spec, self.spec.elastic
        for node in lost:
            self.nodes.remove(node)
            loss = node.channel.lost
            why, detail = change_reason(loss), loss.describe(node.channel.timeout)
            world = self._record(node, why, detail, world, world - node.info.slots)
        if len(self.nodes) < r.min_nodes:
            names = ", ".join(self._node_name(n.info.node) for n in lost)
            say(
                f"{len(self.nodes)} node(s) left, fewer than the minimum of {r.min_nodes}: waiting up to "
                f"{spec.rendezvous_timeout:g} s for nodes to join"
            )
            try:
                self.server.wait_for(r.min_nodes - 1, spec.rendezvous_timeout, self._abort_startup)
            except StartupError as exc:  # a signal came
                return RunResult(JobState.STOPPED, exc.code, signal=self.received.last)
            if len(self.server.live()) < r.min_nodes - 1:
                first = lost[0]
                loss = first.channel.lost
                root = Failure.node_lost(
                    first.info.node,
                    first.info.hostname,
                    loss.describe(first.channel.timeout),
                    loss.last_heard,
                )
                note = (
                    f"fewer than {r.min_nodes} node(s) for {spec.rendezvous_timeout:g} s "
                    f"(--rendezvous-timeout) after losing {names}: the job cannot go on"
                )
                return RunResult(
                    JobState.FAILED,
                    1,
                    root_cause=root,
                    stopped=sum(n.info.slots for n in self.nodes),
                    notes=(note,),
                )
        for node in self._newcomers():
            if len(self.nodes) >= r.max_nodes:
                break
            self.nodes.append(node)
            world = self._record(node, ChangeReason.JOINED, "joined", world, world + node.info.slots)
        return None

    def _record(self, node: RemoteNode, why: ChangeReason, detail: str, old: int, new: int) -> int:
        change = MembershipChange(time.time(), node.info.node, node.info.hostname, why, detail, old, new)
        self.changes.append(change)
        say(f"membership change: {change.describe()}")
        return new

    def _result(self, result: RunResult) -> RunResult:
        """The job's result with its membership changes; nodes that joined too late are told the end too."""
        self.nodes.extend(self._newcomers())
        return dataclasses.replace(result, changes=tuple(self.changes))

    def _abort_startup(self) -> None:
        sig = self.received.last
        if sig:
            raise StartupError(f"received {signal_name(sig)} while waiting for nodes", 128 + sig)

    def _host(self, node: int) -> str:
        if self.server and node in self.server.joined:
            return self.server.joined[node].info.hostname
        return super()._host(node)
