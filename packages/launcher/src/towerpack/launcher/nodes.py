"""The coordinator's view of each node: one whose processes this launcher runs itself (``LocalNode``),
or one whose agent is connected over the control protocol (``RemoteNode``); and the ``ControlServer``
through which agents join."""

from __future__ import annotations

import contextlib
import enum
import queue
import socket
import threading
import time

from towerpack.launcher import net, probe, protocol
from towerpack.launcher.console import say
from towerpack.launcher.errors import AuthenticationError, Closed, ProtocolError, Refusal, Refused
from towerpack.launcher.events import NodeLost, NodeProbed, NodeSignalled, TaskEnded
from towerpack.launcher.group import LocalGroup
from towerpack.launcher.membership import ChangeReason
from towerpack.launcher.output import OutputOptions
from towerpack.launcher.plan import NodeInfo, ports_needed
from towerpack.launcher.ports import HeldPorts
from towerpack.launcher.protocol import (
    Channel,
    Connection,
    Exited,
    Finish,
    Hurry,
    Join,
    Loss,
    LossReason,
    Probe,
    Probed,
    ProbeTarget,
    Reject,
    Side,
    Signalled,
    Start,
    Stop,
    Stopped,
    Welcome,
)
from towerpack.launcher.spec import LaunchSpec, Mode
from towerpack.launcher.tasks import StopRequest, Task


def local_info(
    spec: LaunchSpec, node: int, addr: str, slots: int, cuda, held: HeldPorts, probe_port: int | None
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
            info.hostname, argv, tag, output, lambda e: events.put(TaskEnded(info.node, e)), cpu_bind
        )

    def start(self, tasks: list[Task], attempt: int) -> None:
        self.held.release(self.info.ports[-1])  # MASTER_PORT: the ranks' own code may bind it
        self.group.start(tasks, attempt)

    def stop(self, request: StopRequest) -> int:
        return self.group.stop(request)

    def hurry(self) -> None:
        self.group.hurry()

    def probe(self, targets: list[ProbeTarget]) -> None:
        def run():
            self._events.put(NodeProbed(self.info.node, tuple(probe.probe(targets))))

        threading.Thread(target=run, daemon=True).start()

    def finish(self, code: int) -> None:
        self.held.close()


class RemoteNode:
    """A node run by an agent (another `launch` process) connected to the coordinator."""

    def __init__(self, conn: Connection, info: NodeInfo, events: queue.SimpleQueue, welcome: Welcome):
        self.info = info
        self.state = NodeState.REACHABLE
        self._events = events
        self._stopped = threading.Event()
        self._killed = 0
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

    def _on_lost(self, loss: Loss) -> None:
        self.state = NodeState.LOST
        self._stopped.set()
        why = loss.describe(self.channel.timeout)
        self._events.put(NodeLost(self.info.node, why, loss.last_heard, change_reason(loss)))

    def start(self, tasks: list[Task], attempt: int) -> None:
        # A failed send reports the loss: the attempt then ends instead of waiting for these tasks.
        self.channel.send(Start(attempt, tuple(tasks)))

    def stop(self, request: StopRequest) -> int:
        """Ask the agent to stop; returns when it has (or is lost: the heartbeat bounds the wait)."""
        if self.state is NodeState.LOST:
            return 0
        self._stopped.clear()
        self._killed = 0
        if self.channel.send(Stop(request)):
            self._stopped.wait()
        return self._killed

    def hurry(self) -> None:
        self.channel.send(Hurry())

    def probe(self, targets: list[ProbeTarget]) -> None:
        self.channel.send(Probe(tuple(targets)))

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


class ControlServer:
    """Listens on the coordinator's address for the other nodes' agents; each must prove the job's
    secret and describe a node this job waits for."""

    def __init__(
        self,
        addr: str,
        port: int,
        secret: bytes,
        nnodes: int,
        expected: set[int],
        n_ps: int,
        welcome: Welcome,
        events: queue.SimpleQueue,
    ):
        self.secret = secret
        self.nnodes = nnodes
        self.expected = expected
        self.n_ps = n_ps
        self.welcome = welcome
        self.events = events
        self.joined: dict[int, RemoteNode] = {}
        self._cond = threading.Condition()
        self.sock = socket.socket(net.family(addr))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((addr, port))
        self.sock.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def port(self) -> int:
        return self.sock.getsockname()[1]

    def _accept(self) -> None:
        while True:
            try:
                sock, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._greet, args=(sock,), daemon=True).start()

    def _greet(self, sock: socket.socket) -> None:
        try:
            conn = Connection(sock, Side.COORDINATOR)
        except OSError:
            sock.close()
            return
        try:
            join = protocol.coordinator_handshake(conn, self.secret)
        except ProtocolError as exc:
            say(f"refused a connection from {conn.peer}: {exc}")
            if isinstance(exc, AuthenticationError):
                _refuse(conn, Refusal.WRONG_SECRET, "wrong job secret", authenticated=False)
            else:
                _refuse(conn, Refusal.BROKEN, str(exc), authenticated=False)
            return
        except (Closed, Refused, OSError):
            conn.close()
            return
        with self._cond:
            problem = self._check(join)
            if problem:
                say(f"refused node launcher at {conn.peer}: {problem}")
                _refuse(conn, Refusal.MISMATCH, problem)
                return
            try:
                conn.send(self.welcome)
            except OSError:
                conn.close()
                return
            self._admit(conn, join)
            self._cond.notify_all()

    def _admit(self, conn: Connection, join: Join) -> None:
        """Add the agent that passed ``_check`` (called with the lock held)."""
        self.joined[join.info.node] = RemoteNode(conn, join.info, self.events, self.welcome)

    def _check(self, join: Join) -> str | None:
        """Why this agent cannot join (None: it can). Called with the lock held."""
        info = join.info
        if join.nnodes != self.nnodes or join.n_ps != self.n_ps:
            theirs = f"{join.min_nodes}:{join.max_nodes}" if join.max_nodes else join.nnodes
            return (
                f"node 0 runs --nnodes {self.nnodes} --ps {self.n_ps}, "
                f"this node --nnodes {theirs} --ps {join.n_ps}"
            )
        if info.node not in self.expected:
            return f"node rank {info.node} is not one this job waits for"
        if info.node in self.joined:
            return f"node rank {info.node} has already joined"
        return check_info(info, ports_needed(info.node, info.slots, self.n_ps, self.nnodes))

    def wait_all(self, timeout: float, abort=lambda: None) -> list[int]:
        """Wait for every other node; return the node ranks still missing after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.joined) < len(self.expected) and time.monotonic() < deadline:
                abort()
                self._cond.wait(0.1)
            return sorted(self.expected - set(self.joined))

    def close(self) -> None:
        self.sock.close()


def check_info(info: NodeInfo, ports: int) -> str | None:
    """What is wrong with a joining node's description (None: nothing); it must offer ``ports`` ports."""
    if info.slots < 1 or (info.cuda is not None and len(info.cuda) != info.slots):
        return f"node {info.node} describes {info.slots} slot(s) with GPUs {info.cuda}"
    if len(info.ports) != ports:
        return f"node {info.node} offers {len(info.ports)} ports for its tasks"
    if not all(0 < p < 65536 for p in (*info.ports, info.probe_port or 1)) or not info.addr:
        return f"node {info.node} gives a bad address or port"
    return None


def _refuse(conn: Connection, refusal: Refusal, reason: str, authenticated: bool = True) -> None:
    with contextlib.suppress(OSError):
        conn.send(Reject(refusal, reason), authenticated=authenticated)
    conn.close()
