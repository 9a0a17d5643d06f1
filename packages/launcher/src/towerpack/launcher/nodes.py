"""The coordinator's view of each node: one whose processes this launcher runs itself (``LocalNode``),
or one whose agent is connected over the control protocol (``RemoteNode``; agents join through
:mod:`towerpack.launcher.admission`)."""

from __future__ import annotations

import enum
import queue
import socket
import threading
from collections.abc import Callable

from towerpack.launcher import net, probe
from towerpack.launcher.events import NodeAgreed, NodeLost, NodeProbed, NodeSignalled, RanksChanged, TaskEnded
from towerpack.launcher.group import LocalGroup
from towerpack.launcher.hub import Channel
from towerpack.launcher.membership import ChangeReason
from towerpack.launcher.output import OutputOptions
from towerpack.launcher.plan import NodeInfo
from towerpack.launcher.ports import HeldPorts
from towerpack.launcher.protocol import (
    Agreed,
    Connection,
    Exited,
    Finish,
    Hurry,
    Loss,
    LossReason,
    Members,
    Probe,
    Probed,
    ProbeTarget,
    Ranks,
    Resize,
    Signalled,
    Start,
    Stop,
    Stopped,
    Welcome,
)
from towerpack.launcher.spec import LaunchSpec, Mode
from towerpack.launcher.tasks import StopRequest, Task
from towerpack.utils.resize_files import SlotState


def local_info(
    spec: LaunchSpec,
    node: int,
    addr: str,
    slots: int,
    cuda,
    held: HeldPorts,
    probe_port: int | None,
    control_port: int | None = None,
) -> NodeInfo:
    """How a node run by this launcher describes itself (to the plan, and to the coordinator)."""
    own = spec.mode is Mode.SINGLE and net.is_local(addr)
    return NodeInfo(
        node=node,
        addr=addr,
        hostname=socket.gethostname().split(".")[0] if own else addr,
        slots=slots,
        cuda=None if cuda is None else tuple(cuda),
        ports=held.ports,
        iface=spec.iface or net.iface_for(addr),
        probe_port=probe_port,
        control_port=control_port,
    )


class NodeState(enum.Enum):
    REACHABLE = "reachable"  # its launcher answers (whether or not its processes run)
    LOST = "lost"  # its launcher is gone or silent: nothing can be started or stopped there


class LocalNode:
    """A node whose tasks run in this process's own group."""

    state = NodeState.REACHABLE  # this process runs it: never out of reach

    def __init__(
        self,
        info: NodeInfo,
        argv: list[str],
        tag: str,
        output: OutputOptions,
        events: queue.SimpleQueue,
        cpu_bind: bool,
        held: HeldPorts,
    ):
        self.info = info
        self.held = held
        self._events = events
        self.group = LocalGroup(
            info.hostname,
            argv,
            tag,
            output,
            lambda e: events.put(TaskEnded(info.node, e)),
            cpu_bind,
            lambda states: events.put(RanksChanged(self.info.node)),
        )

    def start(self, tasks: list[Task], attempt: int) -> None:
        self.held.release(self.info.ports[-1])  # MASTER_PORT: the ranks' own code may bind it
        self.group.start(tasks, attempt)

    def resize(self, attempt: int, generation: int, tasks: list[Task]) -> None:
        if attempt == self.group.attempt:
            self.group.resize(generation, tasks)

    def rank_states(self, attempt: int) -> tuple[SlotState, ...]:
        return self.group.rank_states() if attempt == self.group.attempt else ()

    def request_stop(self, request: StopRequest) -> None:
        """Start stopping this node's processes (``wait_stopped`` returns when they are)."""
        result = self._stopped = queue.SimpleQueue()
        threading.Thread(target=lambda: result.put(self.group.stop(request)), daemon=True).start()

    def wait_stopped(self) -> int:
        """How many workers outlived the grace period of the stop ``request_stop`` began."""
        return self._stopped.get()

    def hurry(self) -> None:
        self.group.hurry()

    def probe(self, targets: list[ProbeTarget]) -> None:
        def run():
            self._events.put(NodeProbed(self.info.node, tuple(probe.probe(targets))))

        threading.Thread(target=run, daemon=True).start()

    def finish(self, code: int) -> None:
        self.held.close()


class RemoteNode:
    """A node run by an agent (another `launch` process) connected to the coordinator.

    Its loss is reported as a ``NodeLost`` event, unless ``quiet_loss(node)`` says it needs no report
    (an agent that left before the job started may join again)."""

    def __init__(
        self,
        conn: Connection,
        info: NodeInfo,
        events: queue.SimpleQueue,
        welcome: Welcome,
        quiet_loss: Callable[[RemoteNode], bool] = lambda node: False,
    ):
        self.info = info
        self.state = NodeState.REACHABLE
        self._events = events
        self._quiet_loss = quiet_loss
        self._stopped = threading.Event()
        self._killed = 0
        self.agreed = -1  # the last membership epoch it agreed to (elastic jobs)
        self._ranks: Ranks | None = None  # what its ranks last said of resizing in place
        self.channel = Channel(
            conn, welcome.heartbeat_interval, welcome.heartbeat_timeout, self._on_message, self._on_lost
        )
        self.channel.start()

    def _on_message(self, msg) -> None:
        node = self.info.node
        if isinstance(msg, Exited):
            self._events.put(TaskEnded(node, msg.exit))
        elif isinstance(msg, Stopped):
            self._killed = msg.killed
            self._stopped.set()
        elif isinstance(msg, Signalled):
            self._events.put(NodeSignalled(node, msg.signal))
        elif isinstance(msg, Probed):
            self._events.put(NodeProbed(node, msg.problems))
        elif isinstance(msg, Agreed):
            self.agreed = msg.epoch
            self._events.put(NodeAgreed(node, msg.epoch))
        elif isinstance(msg, Ranks):
            self._ranks = msg
            self._events.put(RanksChanged(node))

    def _on_lost(self, loss: Loss) -> None:
        self.state = NodeState.LOST
        self._stopped.set()
        if self._quiet_loss(self):
            return
        why = loss.describe(self.channel.timeout)
        self._events.put(NodeLost(self.info.node, why, loss.last_heard, change_reason(loss)))

    def start(self, tasks: list[Task], attempt: int) -> None:
        # A failed send reports the loss: the attempt then ends instead of waiting for these tasks.
        self.channel.send(Start(attempt, tuple(tasks)))

    def resize(self, attempt: int, generation: int, tasks: list[Task]) -> None:
        self.channel.send(Resize(attempt, generation, tuple(tasks)))

    def rank_states(self, attempt: int) -> tuple[SlotState, ...]:
        ranks = self._ranks
        return ranks.states if ranks is not None and ranks.attempt == attempt else ()

    def request_stop(self, request: StopRequest) -> None:
        """Ask the agent to stop (``wait_stopped`` returns when it has)."""
        self._stopped.clear()
        self._killed = 0
        if self.state is NodeState.LOST or not self.channel.send(Stop(request)):
            self._stopped.set()

    def wait_stopped(self) -> int:
        """How many workers outlived the grace period, once the agent has stopped (or is lost: the
        heartbeat bounds the wait)."""
        self._stopped.wait()
        return self._killed

    def hurry(self) -> None:
        self.channel.send(Hurry())

    def probe(self, targets: list[ProbeTarget]) -> None:
        self.channel.send(Probe(tuple(targets)))

    def propose(self, members: Members) -> None:
        """Tell the agent the next attempt's membership (answered by ``Agreed``)."""
        self.channel.send(members)

    def drop(self) -> None:
        """Give up on a node that answers heartbeats but not the protocol: it counts as lost."""
        self.state = NodeState.LOST
        self._stopped.set()
        self.channel.close()

    def finish(self, code: int) -> None:
        self.channel.send(Finish(code))
        self.channel.close()


def change_reason(loss: Loss) -> ChangeReason:
    """How a lost connection reads in an elastic job's membership record."""
    return {
        LossReason.CLOSED: ChangeReason.LOST,
        LossReason.SILENT: ChangeReason.SILENT,
        LossReason.BROKEN: ChangeReason.FAILED,
    }[loss.reason]
