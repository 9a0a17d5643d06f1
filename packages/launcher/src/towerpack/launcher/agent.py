"""The launcher of a node other than node 0: joins the coordinator, runs what it is told, reports every
exit, passes its own signals on, and stops its processes when the coordinator is gone or silent."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import threading
import uuid

from towerpack.launcher import joining, net, probe, watchdog
from towerpack.launcher.console import say
from towerpack.launcher.events import CoordinatorLost, LocalStopDone, Message, SignalReceived
from towerpack.launcher.group import FAILURE_GRACE_S, LocalGroup
from towerpack.launcher.hub import Channel
from towerpack.launcher.joining import JoinFailed
from towerpack.launcher.nodes import local_info
from towerpack.launcher.plan import NodeInfo, elastic_ports, ports_needed
from towerpack.launcher.ports import HeldPorts
from towerpack.launcher.probe import ProbeListener
from towerpack.launcher.protocol import (
    Connection,
    Exited,
    Finish,
    Hurry,
    Join,
    Probe,
    Probed,
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
    held = listener = channel = group = None
    try:
        with as_events(events) as received:
            if spec.via_ssh:
                threading.Thread(target=_watch_stdin, args=(events,), daemon=True).start()
            addr = spec.node_addr or net.source_address(spec.master_addr)
            if spec.elastic:
                held = HeldPorts(addr, elastic_ports(spec.slots, spec.n_ps))
            else:
                held = HeldPorts(addr, ports_needed(spec.node_rank, spec.slots, spec.n_ps, spec.nnodes))
            listener = ProbeListener(addr)
            info = local_info(spec, spec.node_rank, addr, spec.slots, spec.cuda, held, listener.port)
            try:
                conn, welcome = _join(spec, info, received)
            except JoinFailed as exc:
                say(str(exc))
                return exc.code
            channel = Channel(
                conn,
                welcome.heartbeat_interval,
                welcome.heartbeat_timeout,
                lambda msg: events.put(Message(msg)),
                lambda loss: events.put(CoordinatorLost(loss.describe(welcome.heartbeat_timeout))),
            )
            group = LocalGroup(
                info.hostname,
                list(spec.argv),
                tag,
                spec.output,
                lambda e: channel.send(Exited(e)),
                spec.cpu_bind,
            )
            channel.start()
            return Agent(spec, info, welcome, channel, group, held, events).serve()
    finally:
        if group is not None:
            group.stop(StopRequest(None, FAILURE_GRACE_S))
        for thing in (channel, listener, held):
            if thing is not None:
                thing.close()
        watchdog.stop(dog)


def _join(spec: LaunchSpec, info: NodeInfo, received: Received) -> tuple[Connection, Welcome]:
    """Join the coordinator (retrying until ``--start-timeout``: see :mod:`towerpack.launcher.joining`)."""
    if spec.elastic:
        r = spec.elastic
        msg = Join(info, 0, spec.n_ps, r.min_nodes, r.max_nodes, spec.backend.value)
    else:
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
    """The supervising loop of a node launcher that a coordinator drives."""

    def __init__(
        self,
        spec: LaunchSpec,
        info: NodeInfo,
        welcome: Welcome,
        channel: Channel,
        group: LocalGroup,
        held: HeldPorts,
        events: queue.SimpleQueue,
    ):
        self.spec, self.info, self.welcome = spec, info, welcome
        self.channel, self.group, self.held, self.events = channel, group, held, events
        self._stopper: threading.Thread | None = None
        self._reply_owed = False
        self._forwarded: int | None = None  # the signal this node passed on in this attempt
        self.signalled: int | None = None

    def serve(self) -> int:
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
                where = net.host_port(self.spec.master_addr, self.spec.master_port)
                say(f"lost contact with node 0 at {where}: {event.why}; stopping this node's processes")
                if self.spec.elastic:
                    say("node 0 coordinates this elastic job and cannot be replaced: the job ends")
                self._finish_stop()
                return 128 + self.signalled if self.signalled else 1
            elif isinstance(event, Message):
                code = self._on_message(event.msg)
                if code is not None:
                    self._finish_stop()
                    return code

    def _on_message(self, msg) -> int | None:
        if isinstance(msg, Start):
            self._forwarded = None
            self.held.release(self.info.ports[-1])  # MASTER_PORT: the ranks' own code may bind it
            self.group.start(list(msg.tasks), msg.attempt)
        elif isinstance(msg, Stop):
            self._reply_owed = True
            if self._stopper is None:  # else: the stop of this node's own signal is under way
                self._stop(msg.request)
        elif isinstance(msg, Hurry):
            self.group.hurry()
        elif isinstance(msg, Probe):
            threading.Thread(target=self._probe, args=(msg.targets,), daemon=True).start()
        elif isinstance(msg, Finish):
            return msg.code
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
