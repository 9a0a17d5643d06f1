"""The coordinator of an elastic job (``--nnodes MIN:MAX``): nodes may be lost or join while it runs. A
change resizes the job in place where every rank can regroup (:mod:`towerpack.launcher.in_place`), and
otherwise restarts the ranks at the new size from their last checkpoint. Node 0 coordinates
first; when it is lost, a surviving node takes over (:mod:`towerpack.launcher.failover`) and runs the
same loop on from there, as long as the survivors hold a quorum (:mod:`towerpack.launcher.quorum`)."""

from __future__ import annotations

import dataclasses
import enum
import queue
import signal
import time
from dataclasses import dataclass

from towerpack.launcher import failover, in_place, job_secret, net, probe
from towerpack.launcher.console import say
from towerpack.launcher.coordinator import Coordinator, StartupError, _unique
from towerpack.launcher.elastic_server import ElasticServer
from towerpack.launcher.errors import USAGE_EXIT
from towerpack.launcher.events import (
    NodeAgreed,
    NodeJoined,
    NodeLost,
    NodeSignalled,
    RanksChanged,
    SignalReceived,
    TaskEnded,
)
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
from towerpack.launcher.protocol import Loss, Member, Members, ProbeTarget
from towerpack.launcher.quorum import Quorum
from towerpack.launcher.results import Failure, JobState, RunResult
from towerpack.launcher.signals import Received
from towerpack.launcher.signals import name as signal_name
from towerpack.launcher.spec import LaunchSpec, Role
from towerpack.launcher.tasks import StopRequest, TaskKind

#: Seconds past the heartbeat timeout that a member has to agree to a membership before it counts as lost.
AGREE_SLACK_S = 2.0
#: Seconds at least that every rank has to take a plan of a resize in place before the job restarts instead.
REGROUP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Takeover:
    """What a node taking over from a lost coordinator brings (see :mod:`towerpack.launcher.failover`):
    the last membership it agreed to (the lost coordinator first), how the coordinator was lost and when
    this node noticed (``time.monotonic()``), and the members it found gone while looking for the next
    one."""

    last: Members
    loss: Loss | None
    noticed: float
    gone: frozenset[int] = frozenset()

    @property
    def lost(self) -> Member:
        return self.last.members[0]


class _Why(enum.Enum):
    """Why an attempt of an elastic job ended."""

    DONE = "done"  # every worker succeeded
    FAILURE = "failure"  # a task failed
    SIGNAL = "signal"  # a signal, here or on a node
    LOST = "lost"  # a member node was lost
    JOINED = "joined"  # a node joined
    RESIZE_FAILED = "resize failed"  # a resize in place did not end: restart at the new size
    ENDED = "ended"  # the job cannot go on (``result`` says why)


@dataclass(frozen=True)
class _End:
    why: _Why
    failure: Failure | None = None
    signal: int | None = None
    origin: str = ""
    result: RunResult | None = None


class ElasticCoordinator(Coordinator):
    """The coordinator of an elastic job: node 0, or the node that took over from a lost coordinator.

    Start: wait for MIN nodes (``--start-timeout``), then ``SETTLE_S`` for more, then attempt 0. Each
    attempt numbers the member nodes densely in join order (the coordinator first), so ``RANK``/
    ``WORLD_SIZE`` stay dense; before it starts, every member is told the membership and must agree
    (``_agree``). Unless the job is resized in place (``in_place.InPlace``), a member lost: every rank
    gets SIGUSR1 (``LOSS_GRACE_S`` to checkpoint), then SIGTERM and SIGKILL; a node joining below MAX:
    SIGUSR1 with ``--grace-period``. Either way the next attempt
    runs on the nodes connected then, and does not use up ``--max-restarts``, provided they are a
    quorum of the last agreed membership (:mod:`towerpack.launcher.quorum`): else this side of a
    partition stops. A task failing with every node still answering is a failure, restarted at the
    same size while ``--max-restarts`` allows. Fewer than MIN nodes left: wait ``--rendezvous-timeout``
    for joins, then fail naming the lost nodes.

    A successor (``successor``) starts from the agent's state instead: it waits for a quorum of the
    last membership to rejoin it, then runs the next attempt.
    """

    def __init__(self, spec: LaunchSpec, takeover: Takeover | None = None):
        super().__init__(spec)
        self.changes: list[MembershipChange] = []
        self.takeover = takeover
        self.me = takeover.last.you if takeover else 0
        self.quorum: Quorum | None = None  # the last agreed membership (None before the first)
        self._epoch = 0
        self._ended: RunResult | None = None  # how an agreement made while resizing in place ended

    @classmethod
    def successor(
        cls,
        spec: LaunchSpec,
        takeover: Takeover,
        node: LocalNode,
        server: ElasticServer,
        tag: str,
        events: queue.SimpleQueue,
        received: Received,
    ) -> ElasticCoordinator:
        """The coordinator a node becomes when it takes over: its own node, control port, events."""
        spec = dataclasses.replace(
            spec, role=Role.COORDINATOR, master_addr=node.info.addr, master_port=server.port
        )
        self = cls(spec, takeover)
        self.tag, self.events, self.received = tag, events, received
        self.server = server
        self.nodes.append(node)
        return self

    # -- setting up -------------------------------------------------------------------------------------
    def _setup(self) -> None:
        spec, r = self.spec, self.spec.elastic
        if spec.backend is Backend.HOROVOD:
            token = job_secret.store_token(spec.secret)
            self.store = GlooStore(spec.master_addr, token, world=r.max_nodes * spec.slots)
        if self.takeover:
            self.server.coordinate(self.takeover.last)
            return
        addr = spec.node_addr or net.source_address(spec.master_addr)
        held = HeldPorts(addr, elastic_ports(spec.slots, spec.n_ps))
        listener = ProbeListener(addr)
        self.listeners.append(listener)
        info = local_info(spec, 0, addr, spec.slots, spec.cuda, held, listener.port)
        self.nodes.append(
            LocalNode(info, list(spec.argv), self.tag, spec.output, self.events, spec.cpu_bind, held)
        )
        try:
            self.server = ElasticServer(
                spec, spec.master_addr, spec.master_port or 0, self.welcome, self.events
            )
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

    def _gather(self) -> RunResult | None:
        """A successor's first rendezvous: up to ``--rendezvous-timeout`` for a quorum of the last
        membership to rejoin (failing at once when too few members are left, or can be reached, to make
        one), then up to ``SETTLE_S`` for the others; whoever did not come is recorded as lost."""
        spec, t = self.spec, self.takeover
        last, lost, me = t.last, t.lost, self.nodes[0]
        self.quorum = Quorum.of((m.node for m in last.members), lost.node)
        others = {m.node for m in last.members} - {self.me, lost.node}
        targets = [ProbeTarget(m.node, m.addr, m.port) for m in last.members if m.node in others - t.gone]
        unreachable = probe.unreachable(targets, timeout=failover.ANSWER_S)
        coming = {p.node for p in targets} - set(unreachable)

        def present() -> set[int]:
            return {self.me} | ({n.info.node for n in self.server.live()} & others)

        world = sum(m.slots for m in last.members)
        world = self._record(
            lost.node, lost.host, *_loss_record(t.loss, self.welcome), world, world - lost.slots
        )
        if not self.quorum.met_by({self.me} | coming):
            shortfall = self.quorum.shortfall(coming | {self.me})
            note = f"node {self.me} ({me.info.hostname}) cannot take over: {shortfall}"
            if unreachable:
                note += f"; cannot reach {', '.join(unreachable.values())}"
            if len(last.members) == 2:
                note += "; with 2 nodes a lost coordinator cannot be told from a network partition, "
                note += "so the job ends"
            return self._lost_coordinator(note)
        where = net.host_port(spec.master_addr, self.server.port)
        say(
            f"node {self.me} ({me.info.hostname}) takes over as the coordinator from node {lost.node} "
            f"({lost.host}); waiting for the other nodes on {where}"
        )
        try:
            ok = self.server.wait_until(
                lambda: self.quorum.met_by(present()), spec.rendezvous_timeout, self._abort_startup
            )
            if ok:
                self.server.wait_until(lambda: coming <= present(), SETTLE_S, self._abort_startup)
        except StartupError as exc:  # a signal came
            return RunResult(JobState.STOPPED, exc.code, signal=self.received.last)
        came = present()
        for m in last.members[1:]:
            if m.node not in came:
                why = "gone" if m.node in t.gone else f"did not rejoin within {spec.rendezvous_timeout:g} s"
                world = self._record(m.node, m.host, ChangeReason.LOST, why, world, world - m.slots)
        if not ok:
            return self._lost_coordinator(
                f"node {self.me} ({me.info.hostname}) could not take over: {self.quorum.shortfall(came)} "
                f"rejoined it within {spec.rendezvous_timeout:g} s (--rendezvous-timeout)"
            )
        order = {m.node: i for i, m in enumerate(last.members)}
        for node in sorted(self._newcomers(), key=lambda n: order.get(n.info.node, len(order))):
            self.nodes.append(node)
            info = node.info
            if info.node not in order:  # a new node that joined meanwhile
                world = self._record(
                    info.node, info.hostname, ChangeReason.JOINED, "joined", world, world + info.slots
                )
        return None

    def _lost_coordinator(self, note: str) -> RunResult:
        """A successor's failure: the lost coordinator is the root cause."""
        lost, loss = self.takeover.lost, self.takeover.loss
        why = loss.describe(self.welcome.heartbeat_timeout) if loss else "lost"
        root = Failure.node_lost(lost.node, lost.host, why, loss.last_heard if loss else time.time())
        stopped = sum(n.info.slots for n in self.nodes)
        return RunResult(JobState.FAILED, 1, root_cause=root, stopped=stopped, notes=(note,))

    # -- running ----------------------------------------------------------------------------------------
    def _supervise(self) -> RunResult:
        spec = self.spec
        cfg = self._job_config()
        attempt, restarts, reason, previous = 0, 0, StartReason.START, 0
        if self.takeover:
            failed = self._gather()
            if failed:
                return self._result(failed)
            last = self.takeover.last
            attempt, reason = last.attempt + 1, StartReason.MEMBERSHIP
            previous = sum(m.slots for m in last.members)
        took = ""  # how long the last restart's stop and rendezvous took
        if self.takeover:
            lost = self.takeover.lost
            took = f" ({time.monotonic() - self.takeover.noticed:.2f} s after losing node {lost.node})"
        while True:
            failed = self._agree(attempt)
            if failed:
                return self._result(failed)
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
            resizes = None
            if in_place.offered(spec):
                extra.update(in_place.rank_env(self.welcome.heartbeat_timeout))
                timeout = max(REGROUP_TIMEOUT_S, 3 * self.welcome.heartbeat_timeout)
                resizes = in_place.InPlace(self, attempt, cfg, extra, timeout)
            plan = build_tasks(dense, cfg, attempt, extra)
            if attempt:
                say(f"attempt {attempt} ({reason.value}): {len(members)} node(s), world size {world}{took}")
            for i, node in enumerate(members):
                node.start(plan[i], attempt)
            end = self._watch_elastic(world, attempt, resizes)
            if end.result is not None:
                return self._result(end.result)
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
            lost = [n for n in self.nodes if n.state is NodeState.LOST]
            if lost or end.why in (_Why.JOINED, _Why.RESIZE_FAILED):
                failed = self._regroup(lost)
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
                self._regroup([])  # nodes that joined meanwhile take part
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

    def _agree(self, attempt: int) -> RunResult | None:
        """Tell every member the membership of ``attempt`` and wait until each agreed or was lost (a
        heartbeat timeout at most). Members that did not agree leave as lost nodes (``_regroup``, which
        checks the quorum), and the rest is asked again; returns a failure or a stop instead."""
        while True:
            self._epoch += 1
            remote = [n for n in self.nodes if isinstance(n, RemoteNode)]
            members = tuple(self._member(n) for n in self.nodes)
            for node in remote:
                node.propose(Members(self._epoch, attempt, members, node.info.node, self.server.next_id))
            ids = {n.info.node for n in remote}
            deadline = time.monotonic() + self.welcome.heartbeat_timeout + AGREE_SLACK_S
            deferred = []  # events for the attempt's loop (joins, exits of the last attempt)
            while time.monotonic() < deadline and any(
                n.agreed != self._epoch and n.state is NodeState.REACHABLE for n in remote
            ):
                try:
                    event = self.events.get(timeout=0.1)
                except queue.Empty:
                    continue
                if isinstance(event, SignalReceived) or (
                    isinstance(event, NodeSignalled) and event.node in ids
                ):
                    origin = self._node_name(event.node) if isinstance(event, NodeSignalled) else ""
                    sig = event.signal
                    return RunResult(JobState.STOPPED, 128 + sig, signal=sig, signal_origin=origin)
                if not isinstance(event, (NodeAgreed, NodeLost)):
                    deferred.append(event)
            for event in deferred:
                self.events.put(event)
            gone = [n for n in remote if n.agreed != self._epoch]
            if not gone:
                self.quorum = Quorum.of((n.info.node for n in self.nodes), self.me)
                return None
            for node in gone:
                if node.state is NodeState.REACHABLE:
                    node.drop()
            failed = self._regroup(gone)
            if failed:
                return failed

    def _member(self, node: LocalNode | RemoteNode) -> Member:
        info = node.info
        if isinstance(node, LocalNode):
            return Member(info.node, info.hostname, self.spec.master_addr, self.server.port, info.slots)
        return Member(info.node, info.hostname, info.addr, info.control_port or 0, info.slots)

    def _watch_elastic(self, workers: int, attempt: int, resizes: in_place.InPlace | None = None) -> _End:
        """Wait until every worker succeeded, a task failed, a member was lost, a node joined or a signal
        came; with ``resizes``, a lost or joining node is taken in place where the ranks can. Events about
        nodes that are no longer (or not yet) members are left alone."""
        succeeded: set[tuple[int, object]] = set()
        while True:
            members = {n.info.node for n in self.nodes}
            try:
                event = self.events.get(timeout=0.5 if resizes is not None and resizes.busy else None)
            except queue.Empty:
                late = resizes.overdue()
                if late:
                    say(f"{late}; restarting every rank")
                    return _End(_Why.RESIZE_FAILED)
                continue
            if isinstance(event, SignalReceived):
                return _End(_Why.SIGNAL, signal=event.signal)
            if isinstance(event, NodeSignalled) and event.node in members:
                return _End(_Why.SIGNAL, signal=event.signal, origin=self._node_name(event.node))
            if isinstance(event, NodeLost) and event.node in members:
                say(f"{self._node_name(event.node)} lost ({event.why})")
                gone = [n for n in self.nodes if n.state is NodeState.LOST]
                if resizes is not None and resizes.lost(gone):
                    if self._ended:
                        return _End(_Why.ENDED, result=self._ended)
                    continue
                say("stopping every rank")
                return _End(_Why.LOST)
            if isinstance(event, NodeJoined) and self._newcomers():
                if resizes is not None and resizes.joined(self._newcomers()):
                    if self._ended:
                        return _End(_Why.ENDED, result=self._ended)
                    continue
                who = ", ".join(self._node_name(n.info.node) for n in self._newcomers())
                say(f"{who} joined; asking every rank to checkpoint and stop, to restart at the larger size")
                return _End(_Why.JOINED)
            if isinstance(event, RanksChanged) and resizes is not None:
                failed = resizes.ranks_changed()
                if failed:
                    say(f"{failed}; restarting every rank")
                    return _End(_Why.RESIZE_FAILED)
                continue
            if not isinstance(event, TaskEnded) or event.exit.attempt != attempt or event.node not in members:
                continue
            if event.exit.code != 0:
                if resizes is not None and resizes.busy:
                    failure = Failure.of_exit(event.node, event.exit)
                    say(f"{failure.who()} failed while resizing in place ({failure.reason}); restarting")
                    return _End(_Why.RESIZE_FAILED)
                return _End(_Why.FAILURE, failure=Failure.of_exit(event.node, event.exit))
            if event.exit.kind is TaskKind.WORKER:
                succeeded.add((event.node, event.exit.task))
                # Ranks that finished training before a joining node's ranks were ready end the job: those
                # have nothing left to join (they are stopped with the job).
                world = resizes.training() if resizes is not None else workers
                if sum(1 for node, _ in succeeded if node in members) >= world:
                    return _End(_Why.DONE)

    # -- what a resize in place asks of the coordinator ----------------------------------------------------
    def drop_member(self, node) -> None:
        """Take a lost member out of the membership, recording the change."""
        world = sum(n.info.slots for n in self.nodes)
        self.nodes.remove(node)
        reason, detail = _loss_record(node.channel.lost, self.welcome)
        self._record(node.info.node, node.info.hostname, reason, detail, world, world - node.info.slots)

    def add_member(self, node) -> None:
        """Take a joined node into the membership, recording the change."""
        world = sum(n.info.slots for n in self.nodes)
        self.nodes.append(node)
        info = node.info
        self._record(info.node, info.hostname, ChangeReason.JOINED, "joined", world, world + info.slots)

    def agree_in_place(self, attempt: int) -> RunResult | None:
        """The members agree to the membership resized in place; a failure (or stop) is kept for the loop."""
        self._ended = self._agree(attempt)
        return self._ended

    def _stop_request(self, end: _End) -> StopRequest:
        """A signal is passed on as it came; a membership change asks for a checkpoint first (SIGUSR1),
        briefly after a loss (ranks blocked on the dead peer will not answer); else SIGTERM."""
        grace = self.spec.grace_period
        if end.why is _Why.SIGNAL:
            return StopRequest(end.signal, grace)
        if end.why is _Why.JOINED:
            return StopRequest(signal.SIGUSR1, grace)
        if end.why in (_Why.LOST, _Why.RESIZE_FAILED):
            if not self._keeps_quorum():  # this side stops for good: a checkpoint could race the others'
                return StopRequest(None, FAILURE_GRACE_S)
            return StopRequest(signal.SIGUSR1, min(LOSS_GRACE_S, grace))
        return StopRequest(None, FAILURE_GRACE_S)

    def _keeps_quorum(self) -> bool:
        """Whether the members this node still reaches hold a quorum of the last agreed membership."""
        reachable = {n.info.node for n in self.nodes if n.state is NodeState.REACHABLE}
        return self.quorum is None or self.quorum.met_by(reachable)

    def _regroup(self, lost: list[RemoteNode]) -> RunResult | None:
        """Drop the lost members (recording each change); stop if the rest is no quorum; wait for nodes
        when fewer than MIN are left; take in the newcomers. Returns the failure, if the job cannot go
        on."""
        spec, r = self.spec, self.spec.elastic
        world = sum(n.info.slots for n in self.nodes)
        for node in lost:
            self.nodes.remove(node)
            reason, detail = _loss_record(node.channel.lost, self.welcome)
            world = self._record(
                node.info.node, node.info.hostname, reason, detail, world, world - node.info.slots
            )
        reachable = {n.info.node for n in self.nodes if n.state is NodeState.REACHABLE}
        if lost and self.quorum and not self.quorum.met_by(reachable):
            note = (
                f"node {self.me} ({self._host(self.me)}) stops: {self.quorum.shortfall(reachable)} reach it, "
                "and the others may go on without it (a network partition looks the same)"
            )
            return RunResult(
                JobState.FAILED,
                1,
                root_cause=self._lost_failure(lost[0]),
                stopped=sum(n.info.slots for n in self.nodes),
                notes=(note,),
            )
        if len(self.nodes) < r.min_nodes:
            names = ", ".join(self._node_name(n.info.node) for n in lost) or "nodes"
            say(
                f"{len(self.nodes)} node(s) left, fewer than the minimum of {r.min_nodes}: waiting up to "
                f"{spec.rendezvous_timeout:g} s for nodes to join"
            )
            try:
                self.server.wait_for(r.min_nodes - 1, spec.rendezvous_timeout, self._abort_startup)
            except StartupError as exc:  # a signal came
                return RunResult(JobState.STOPPED, exc.code, signal=self.received.last)
            if len(self.server.live()) < r.min_nodes - 1:
                note = (
                    f"fewer than {r.min_nodes} node(s) for {spec.rendezvous_timeout:g} s "
                    f"(--rendezvous-timeout) after losing {names}: the job cannot go on"
                )
                return RunResult(
                    JobState.FAILED,
                    1,
                    root_cause=self._lost_failure(lost[0]) if lost else None,
                    stopped=sum(n.info.slots for n in self.nodes),
                    notes=(note,),
                )
        for node in self._newcomers():
            if len(self.nodes) >= r.max_nodes:
                break
            self.nodes.append(node)
            world = self._record(
                node.info.node,
                node.info.hostname,
                ChangeReason.JOINED,
                "joined",
                world,
                world + node.info.slots,
            )
        return None

    def _lost_failure(self, node: RemoteNode) -> Failure:
        loss = node.channel.lost
        why = loss.describe(node.channel.timeout) if loss else "it did not confirm the new membership"
        heard = loss.last_heard if loss else node.channel.last_heard
        return Failure.node_lost(node.info.node, node.info.hostname, why, heard)

    def _record(self, node: int, host: str, why: ChangeReason, detail: str, old: int, new: int) -> int:
        change = MembershipChange(time.time(), node, host, why, detail, old, new)
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


def _loss_record(loss: Loss | None, welcome) -> tuple[ChangeReason, str]:
    """How a lost connection reads in the membership record (None: the node stopped answering)."""
    if loss is None:
        return ChangeReason.SILENT, "it did not confirm the new membership"
    return change_reason(loss), loss.describe(welcome.heartbeat_timeout)
