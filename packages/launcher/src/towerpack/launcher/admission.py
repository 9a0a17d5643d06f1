"""How node 0 admits the other nodes' agents: ``ControlServer`` listens, authenticates every joining
agent, checks that it fits the job, and hands it over as a :class:`~towerpack.launcher.nodes.RemoteNode`.

Everything runs on the launcher's hub (:mod:`towerpack.launcher.hub`): hundreds of agents joining at
once cost node 0 no thread each and never wait on one another. Its listen backlog and the number of
handshakes it carries at once are sized for the job; beyond that, and for a connection that does not
complete its handshake within ``HANDSHAKE_LIMIT_S``, the answer is a ``BUSY`` refusal, which the
agent retries (:mod:`towerpack.launcher.joining`). Until the agent has proved the job's secret,
nothing it sent is used, and its frames are capped at ``MAX_HANDSHAKE_FRAME`` bytes.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time

from towerpack.launcher import net
from towerpack.launcher.console import say
from towerpack.launcher.errors import AuthenticationError, Closed, ProtocolError, Refusal
from towerpack.launcher.hub import Hub
from towerpack.launcher.nodes import RemoteNode
from towerpack.launcher.plan import NodeInfo, ports_needed
from towerpack.launcher.protocol import (
    HANDSHAKE_TIMEOUT_S,
    Connection,
    CoordinatorHandshake,
    Join,
    Reject,
    Side,
    Welcome,
)

#: Handshakes node 0 carries at once, at least (more for larger jobs: see ``ControlServer``).
MIN_PENDING = 64
#: Seconds a connection has to complete its handshake. Waiting costs node 0 nothing but the slot, and
#: an agent on a loaded machine may be slow to answer.
HANDSHAKE_LIMIT_S = 3 * HANDSHAKE_TIMEOUT_S

Problem = tuple[Refusal, str]  # why an agent cannot join, as a kind and in words


class ControlServer:
    """Listens on the coordinator's address for the other nodes' agents; each must prove the job's
    secret and describe a node this job waits for.

    Before the job starts (``wait_all``), an agent whose connection ends is forgotten, so that it can
    join again: its first connection may have timed out on its side while node 0 welcomed it.
    """

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
        hub: Hub | None = None,
    ):
        self.secret = secret
        self.nnodes = nnodes
        self.expected = expected
        self.n_ps = n_ps
        self.welcome = welcome
        self.events = events
        self.hub = hub or Hub.default()
        self.joined: dict[int, RemoteNode] = {}
        self.started = False  # the job's nodes are settled: a lost one is a lost node
        self.elsewhere: tuple[str, int] | None = None  # the coordinator an ELSEWHERE refusal names
        self._cond = threading.Condition()
        self._pending: set[_Pending] = set()  # touched on the hub's thread only
        self.max_pending = max(MIN_PENDING, 2 * nnodes)
        self.sock = socket.socket(net.family(addr))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((addr, port))
        self.sock.listen(self.max_pending)  # the kernel caps it (net.core.somaxconn)
        self.sock.setblocking(False)
        self.hub.add(self)

    @property
    def port(self) -> int:
        return self.sock.getsockname()[1]

    # -- on the hub ----------------------------------------------------------------------------------
    def fileno(self) -> int:
        return self.sock.fileno()

    def on_readable(self) -> None:
        """Accept every connection waiting (the socket is non-blocking)."""
        while True:
            try:
                sock, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors, or closed: the next readiness tries again
                if self.sock.fileno() >= 0:
                    say(f"cannot accept a node's connection: {exc.strerror or exc}")
                return
            try:
                conn = Connection(sock, Side.COORDINATOR)
            except OSError:  # gone already
                sock.close()
                continue
            if len(self._pending) >= self.max_pending:
                _refuse(conn, Refusal.BUSY, "too many nodes joining at once", authenticated=False)
                continue
            pending = _Pending(self, conn)
            self._pending.add(pending)
            self.hub.add(pending)

    def on_tick(self, now: float) -> None:
        pass

    def _settle(self, pending: _Pending, join: Join) -> None:
        """The handshake of ``pending`` is done: welcome or refuse its agent."""
        self._pending.discard(pending)
        conn = pending.conn
        with self._cond:
            problem = self._check(join)
            if problem:
                refusal, reason = problem
                elsewhere = self.elsewhere if refusal is Refusal.ELSEWHERE else None
                if self._worth_saying(refusal):
                    say(f"refused node launcher at {conn.peer}: {reason}")
                self.hub.remove(pending)
                _refuse(conn, refusal, reason, elsewhere=elsewhere)
                return
            try:
                conn.send(self.welcome)
            except OSError:
                self.hub.remove(pending, close=conn.sock)
                return
            self.hub.remove(pending)  # its connection goes on as the node's channel
            self._admit(conn, join)
            self._cond.notify_all()

    def _worth_saying(self, refusal: Refusal) -> bool:
        """Whether refusing an agent this way is news for this launcher's output."""
        return refusal is not Refusal.ELSEWHERE

    def _drop(self, pending: _Pending) -> None:
        self._pending.discard(pending)
        self.hub.remove(pending, close=pending.conn.sock)

    # -- the job's rules -------------------------------------------------------------------------------
    def _admit(self, conn: Connection, join: Join) -> None:
        """Add the agent that passed ``_check`` (called with the lock held)."""
        node = RemoteNode(conn, join.info, self.events, self.welcome, self._left_before_start)
        self.joined[join.info.node] = node

    def _left_before_start(self, node: RemoteNode) -> bool:
        """Before the start, a node whose connection ended is forgotten (it may join again)."""
        with self._cond:
            if self.started or self.joined.get(node.info.node) is not node:
                return False
            del self.joined[node.info.node]
            self._cond.notify_all()
        return True

    def _check(self, join: Join) -> Problem | None:
        """Why this agent cannot join (None: it can). Called with the lock held."""
        info = join.info
        if join.nnodes != self.nnodes or join.n_ps != self.n_ps:
            theirs = f"{join.min_nodes}:{join.max_nodes}" if join.max_nodes else join.nnodes
            return Refusal.MISMATCH, (
                f"node 0 runs --nnodes {self.nnodes} --ps {self.n_ps}, "
                f"this node --nnodes {theirs} --ps {join.n_ps}"
            )
        if info.node not in self.expected:
            return Refusal.MISMATCH, f"node rank {info.node} is not one this job waits for"
        if info.node in self.joined:
            if self.started:
                return Refusal.FULL, f"node rank {info.node} is already in the running job"
            # Perhaps this node's own earlier connection, whose end node 0 has not seen yet.
            return Refusal.BUSY, f"node rank {info.node} has already joined"
        problem = check_info(info, ports_needed(info.node, info.slots, self.n_ps, self.nnodes))
        return (Refusal.MISMATCH, problem) if problem else None

    def wait_all(self, timeout: float, abort=lambda: None) -> list[int]:
        """Wait for every other node; return the node ranks still missing after ``timeout`` (none: the
        job's nodes are settled from now on)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.joined) < len(self.expected) and time.monotonic() < deadline:
                abort()
                self._cond.wait(0.1)
            missing = sorted(self.expected - set(self.joined))
            self.started = not missing
            return missing

    def close(self) -> None:
        self.hub.remove(self, close=self.sock)


class _Pending:
    """One connection from its accept to the end of its handshake, served by the hub."""

    def __init__(self, server: ControlServer, conn: Connection):
        self.server = server
        self.conn = conn
        self.handshake = CoordinatorHandshake(conn, server.secret)
        self.deadline = time.monotonic() + HANDSHAKE_LIMIT_S
        self._fd = conn.sock.fileno()

    def fileno(self) -> int:
        return self._fd

    def on_readable(self) -> None:
        try:
            self.conn.fill()
            while (msg := self.conn.take()) is not None:
                join = self.handshake.on_message(msg)
                if join is not None:
                    self.server._settle(self, join)
                    return
        except ProtocolError as exc:
            say(f"refused a connection from {self.conn.peer}: {exc}")
            self.server._pending.discard(self)
            self.server.hub.remove(self)
            refusal = Refusal.WRONG_SECRET if isinstance(exc, AuthenticationError) else Refusal.BROKEN
            reason = "wrong job secret" if refusal is Refusal.WRONG_SECRET else str(exc)
            _refuse(self.conn, refusal, reason, authenticated=False)
        except (Closed, OSError):  # the agent gave up (it tries again), or went away
            self.server._drop(self)

    def on_tick(self, now: float) -> None:
        if now > self.deadline:
            say(f"refused a connection from {self.conn.peer}: no handshake within {HANDSHAKE_LIMIT_S:g} s")
            self.server._pending.discard(self)
            self.server.hub.remove(self)
            _refuse(self.conn, Refusal.BUSY, "the handshake took too long", authenticated=False)


def check_info(info: NodeInfo, ports: int) -> str | None:
    """What is wrong with a joining node's description (None: nothing); it must offer ``ports`` ports."""
    if info.slots < 1 or (info.cuda is not None and len(info.cuda) != info.slots):
        return f"node {info.node} describes {info.slots} slot(s) with GPUs {info.cuda}"
    if len(info.ports) != ports:
        return f"node {info.node} offers {len(info.ports)} ports for its tasks"
    if not all(0 < p < 65536 for p in (*info.ports, info.probe_port or 1)) or not info.addr:
        return f"node {info.node} gives a bad address or port"
    return None


def _refuse(
    conn: Connection,
    refusal: Refusal,
    reason: str,
    authenticated: bool = True,
    elsewhere: tuple[str, int] | None = None,
) -> None:
    """Answer with a Reject (naming the coordinator ``elsewhere``, if given) and close (a connection no
    longer served by the hub)."""
    addr, port = elsewhere or ("", 0)
    with contextlib.suppress(OSError):
        conn.send(Reject(refusal, reason, addr, port), authenticated=authenticated)
    conn.close()
