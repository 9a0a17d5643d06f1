"""The launcher of a node other than node 0: joins the coordinator, runs what it is told, reports every
exit, passes its own signals on, and stops its processes when the coordinator is gone or silent (in an
elastic job, then finds the next coordinator, or becomes it)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import signal
import threading
import time
import uuid

from towerpack.launcher import failover, joining, net, probe, watchdog
from towerpack.launcher.console import say
from towerpack.launcher.coordinator import welcome_for
from towerpack.launcher.elastic import ElasticCoordinator, Takeover
from towerpack.launcher.elastic_server import ElasticServer, Standing
from towerpack.launcher.errors import UsageError
from towerpack.launcher.events import CoordinatorLost, LocalStopDone, Message, SignalReceived
from towerpack.launcher.failover import Next
from towerpack.launcher.group import FAILURE_GRACE_S, LocalGroup
from towerpack.launcher.hub import Channel
from towerpack.launcher.joining import JoinFailed
from towerpack.launcher.membership import LOSS_GRACE_S
from towerpack.launcher.nodes import LocalNode, local_info
from towerpack.launcher.plan import NodeInfo, elastic_ports, ports_needed
from towerpack.launcher.ports import HeldPorts
from towerpack.launcher.probe import ProbeListener
from towerpack.launcher.protocol import (
    Agreed,
    Connection,
    Exited,
    Finish,
    Hurry,
    Join,
    Members,
    Probe,
    Probed,
    Ranks,
    Resize,
    Signalled,
    Start,
    Stop,
    Stopped,
    Welcome,
)
from towerpack.launcher.signals import Received, as_events
from towerpack.launcher.signals import name as signal_name
from towerpack.launcher.spec import LaunchSpec
from towerpack.launcher.tasks import StopRequest


def run(spec: LaunchSpec) -> int:
    tag = f"{spec.job_id}-{uuid.uuid4().hex[:8]}"
    events: queue.SimpleQueue = queue.SimpleQueue()
    dog = watchdog.start(tag)
    held = listener = server = agent = None
    try:
        with as_events(events) as received:
            if spec.via_ssh:
                threading.Thread(target=_watch_stdin, args=(events,), daemon=True).start()
            addr = spec.node_addr or net.source_address(spec.master_addr)
            if spec.elastic:
                held = HeldPorts(addr, elastic_ports(spec.slots, spec.n_ps))
                server = _control_server(spec, addr, events)
            else:
                held = HeldPorts(addr, ports_needed(spec.node_rank, spec.slots, spec.n_ps, spec.nnodes))
            listener = ProbeListener(addr)
            info = local_info(
                spec, spec.node_rank, addr, spec.slots, spec.cuda, held, listener.port, server and server.port
            )
            try:
                conn, welcome = _join(spec, info, received)
            except JoinFailed as exc:
                say(str(exc))
                return exc.code
            agent = Agent(spec, info, tag, held, events, received, server)
            return agent.serve(conn, welcome)
    finally:
        if agent is not None:
            agent.close()
        for thing in (listener, server, held):
            if thing is not None:
                thing.close()
        watchdog.stop(dog)


def _control_server(spec: LaunchSpec, addr: str, events: queue.SimpleQueue) -> ElasticServer:
    """Where this node of an elastic job listens: the port ``--master`` gives for its address (else the
    first one's), or any free port if that one is taken (or is node 0's: node 0 may start later); on
    every address if ``addr`` is not one of this machine's (behind NAT). Until it knows the job's
    membership, it sends joining launchers to node 0."""
    port = dict(spec.masters).get(addr, spec.master_port)
    if (addr, port) == (spec.master_addr, spec.master_port):
        port = 0
    wildcard = "::" if ":" in addr else "0.0.0.0"
    for where in dict.fromkeys(((addr, port), (addr, 0), (wildcard, 0))):
        try:
            server = ElasticServer(spec, *where, welcome_for(spec), events, Standing.FOLLOWING)
        except OSError:
            continue
        server.follow(spec.master_addr, spec.master_port, "node 0")
        return server
    raise UsageError(f"cannot listen for control connections on this node (address {addr})")


def _join(spec: LaunchSpec, info: NodeInfo, received: Received) -> tuple[Connection, Welcome]:
    """Join the coordinator (retrying until ``--start-timeout``: see :mod:`towerpack.launcher.joining`)."""
    if spec.elastic:
        r = spec.elastic
        msg = Join(info, 0, spec.n_ps, r.min_nodes, r.max_nodes, spec.backend.value)
        mine = (info.addr, info.control_port)  # a node listed in --master does not ask itself
        targets = [t for t in spec.masters if t != mine] or [(spec.master_addr, spec.master_port)]
        return joining.join_any(
            targets, spec.secret, msg, spec.start_timeout, give_up=lambda: bool(received.last)
        )
    msg = Join(info, spec.nnodes, spec.n_ps)
    return joining.join(
        spec.master_addr,
        spec.master_port,
        spec.secret,
        msg,
        spec.start_timeout,
        give_up=lambda: bool(received.last),
    )


def _watch_stdin(events: queue.SimpleQueue) -> None:
    # Started over ssh: the end of stdin means the launcher that started us is gone.
    # os.read, not sys.stdin: a daemon thread blocked in a buffered read breaks interpreter shutdown.
    with contextlib.suppress(OSError):
        while os.read(0, 65536):
            pass
    events.put(CoordinatorLost("the ssh connection from node 0 closed"))


class Agent:
    """The supervising loop of a node launcher that a coordinator drives.

    In an elastic job it also keeps the last membership the coordinator sent; when the coordinator is
    lost it stops its ranks (SIGUSR1, as after any loss) and finds the next coordinator
    (:mod:`towerpack.launcher.failover`): it rejoins it and goes on serving, or becomes it.
    """

    def __init__(
        self,
        spec: LaunchSpec,
        info: NodeInfo,
        tag: str,
        held: HeldPorts,
        events: queue.SimpleQueue,
        received: Received,
        server: ElasticServer | None = None,
    ):
        self.spec, self.info, self.tag = spec, info, tag
        self.held, self.events, self.received, self.server = held, events, received, server
        self.channel: Channel | None = None
        self.welcome: Welcome | None = None
        self.group = LocalGroup(
            info.hostname,
            list(spec.argv),
            tag,
            spec.output,
            lambda e: self.channel.send(Exited(e)),
            spec.cpu_bind,
            lambda states: self.channel.send(Ranks(self.group.attempt, states)),
        )
        self.coordinator = f"node 0 at {net.host_port(spec.master_addr, spec.master_port)}"
        self.last: Members | None = None  # the membership last agreed to (elastic jobs)
        self._stopper: threading.Thread | None = None
        self._reply_owed = False
        self._forwarded: int | None = None  # the signal this node passed on in this attempt
        self.signalled: int | None = None

    def _connect(self, conn: Connection, welcome: Welcome) -> None:
        """Serve the connection to a coordinator (the first, or one that took over)."""
        self.welcome = welcome
        self.channel = Channel(
            conn,
            welcome.heartbeat_interval,
            welcome.heartbeat_timeout,
            lambda msg: self.events.put(Message(msg)),
            lambda loss: self.events.put(CoordinatorLost(loss.describe(welcome.heartbeat_timeout), loss)),
        )
        self.channel.start()

    def close(self) -> None:
        self.group.stop(StopRequest(None, FAILURE_GRACE_S))
        if self.channel is not None:
            self.channel.close()

    def serve(self, conn: Connection, welcome: Welcome) -> int:
        self._connect(conn, welcome)
        while True:
            event = self.events.get()
            if isinstance(event, SignalReceived):
                self._on_signal(event.signal)
            elif isinstance(event, LocalStopDone):
                self._stopper = None
                if self._reply_owed:
                    self._reply_owed = False
                    self.channel.send(Stopped(event.killed))
            elif isinstance(event, CoordinatorLost):
                if self.spec.elastic and not self.signalled:
                    code = self._fail_over(event) if self.last else self._join_again(event)
                    if code is None:
                        continue
                    return code
                say(f"lost contact with {self.coordinator}: {event.why}; stopping this node's processes")
                self._finish_stop()
                return 128 + self.signalled if self.signalled else 1
            elif isinstance(event, Message):
                code = self._on_message(event.msg)
                if code is not None:
                    self._finish_stop()
                    return code

    def _on_message(self, msg) -> int | None:
        if isinstance(msg, Start):
            if self._stopper is not None:  # the stop that followed the loss of a coordinator
                self._stopper.join()
            self._forwarded = None
            self.held.release(self.info.ports[-1])  # MASTER_PORT: the ranks' own code may bind it
            self.group.start(list(msg.tasks), msg.attempt)
        elif isinstance(msg, Stop):
            self._reply_owed = True
            if self._stopper is None:  # else: the stop of this node's own signal is under way
                self._stop(msg.request)
        elif isinstance(msg, Resize):
            if msg.attempt == self.group.attempt:  # else: a resize of an attempt this node has stopped
                self.group.resize(msg.generation, list(msg.tasks))
        elif isinstance(msg, Hurry):
            self.group.hurry()
        elif isinstance(msg, Probe):
            threading.Thread(target=self._probe, args=(msg.targets,), daemon=True).start()
        elif isinstance(msg, Members):
            self.last = msg
            head = msg.members[0]
            self.coordinator = f"node {head.node} at {net.host_port(head.addr, head.port)}"
            self.server.follow(head.addr, head.port, f"node {head.node}")
            self.channel.send(Agreed(msg.epoch))
        elif isinstance(msg, Finish):
            return msg.code
        return None

    def _fail_over(self, event: CoordinatorLost) -> int | None:
        """The coordinator is lost: stop the ranks and find the next one (None: rejoined, serve on);
        returns the exit code otherwise (this node took over and the job ended, or a signal came)."""
        last, noticed = self.last, time.monotonic()
        say(
            f"lost contact with {self.coordinator}, the coordinator: {event.why}; stopping this node's "
            "processes and finding the next coordinator"
        )
        self.server.seek()
        self._reply_owed = False
        if self._stopper is None:
            self._stop(StopRequest(signal.SIGUSR1, min(LOSS_GRACE_S, self.spec.grace_period)))
        r = self.spec.elastic
        join = Join(self.info, 0, self.spec.n_ps, r.min_nodes, r.max_nodes, self.spec.backend.value, last.you)
        patience = failover.patience_for(self.welcome.heartbeat_timeout)
        found = failover.find(last, join, self.spec.secret, patience, lambda: self.received.last is not None)
        if found.next is Next.JOINED:
            head = found.coordinator
            say(f"rejoined the job: node {head.node} ({head.host}) coordinates it now")
            self.coordinator = f"node {head.node} at {net.host_port(head.addr, head.port)}"
            self.server.follow(head.addr, head.port, f"node {head.node}")
            self.last = None  # until the new coordinator sends the membership
            self._connect(found.conn, found.welcome)
            return None
        if found.next is Next.LEAD:  # the others may rejoin while this node's ranks stop
            self.server.coordinate(last)
        self._finish_stop()
        if found.next is Next.GAVE_UP:
            self.signalled = self.signalled or self.received.last
            return 128 + self.signalled
        node = LocalNode(
            dataclasses.replace(self.info, node=last.you),
            list(self.spec.argv),
            self.tag,
            self.spec.output,
            self.events,
            self.spec.cpu_bind,
            self.held,
        )
        takeover = Takeover(last, event.loss, noticed, found.gone)
        coordinator = ElasticCoordinator.successor(
            self.spec, takeover, node, self.server, self.tag, self.events, self.received
        )
        try:
            return coordinator.serve()
        finally:
            coordinator.close()

    def _join_again(self, event: CoordinatorLost) -> int | None:
        """The coordinator was lost before it told this node the membership (it had just joined): join the
        job again as a new node, through ``--master`` (None: joined; else the exit code)."""
        say(f"lost contact with {self.coordinator}: {event.why}; joining the job again through --master")
        self._finish_stop()
        self.server.follow(self.spec.master_addr, self.spec.master_port, "node 0")
        try:
            conn, welcome = _join(self.spec, self.info, self.received)
        except JoinFailed as exc:
            say(str(exc))
            return exc.code
        self._connect(conn, welcome)
        return None

    def _on_signal(self, sig: int) -> None:
        self.signalled = self.signalled or sig
        if self._stopper is not None:
            if sig == signal.SIGINT:
                self.group.hurry()
            return
        if self._forwarded is None:
            # Passed on here at once (the coordinator may be far or slow), then the whole job stops.
            self._forwarded = sig
            self.channel.send(Signalled(sig))
            say(f"received {signal_name(sig)}; passing it to this node's workers")
            self._stop(StopRequest(sig, self.welcome.grace_period))

    def _stop(self, request: StopRequest) -> None:
        def run():
            self.events.put(LocalStopDone(self.group.stop(request)))

        self._stopper = threading.Thread(target=run, daemon=True)
        self._stopper.start()

    def _finish_stop(self) -> None:
        """Before exiting: let a stop under way end, else stop what may still run."""
        if self._stopper is not None:
            self._stopper.join()
        else:
            self.group.stop(StopRequest(None, FAILURE_GRACE_S))

    def _probe(self, targets) -> None:
        self.channel.send(Probed(tuple(probe.probe(targets))))
