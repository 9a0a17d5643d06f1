"""The coordinator's view of each node: one on this machine, or an agent connected over TCP.

Wire format between coordinator and agents: one JSON object per line. Agent -> coordinator:
``hello`` (its NodeInfo), ``exit`` (a task ended), ``stopped``. Coordinator -> agent: ``start``
(attempt and tasks), ``stop``, ``finish`` (the job's exit code).
"""

from __future__ import annotations

import contextlib
import json
import queue
import socket
import threading
import time
from dataclasses import asdict

from towerpack.launcher.group import STOP_GRACE_S, Exit, LocalGroup, Task
from towerpack.launcher.output import OutputOptions
from towerpack.launcher.plan import NodeInfo


class Channel:
    """JSON lines over a socket; ``send`` is thread-safe, ``recv`` returns None when the peer is gone."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._reader = sock.makefile("rb")
        self._lock = threading.Lock()

    def send(self, msg: dict) -> bool:
        data = (json.dumps(msg) + "\n").encode()
        with self._lock:
            try:
                self.sock.sendall(data)
                return True
            except OSError:
                return False

    def recv(self) -> dict | None:
        try:
            line = self._reader.readline()
        except (OSError, ValueError):
            return None
        if not line:
            return None
        try:
            return json.loads(line)
        except ValueError:
            return None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


class LocalNode:
    """A node whose tasks run in this process's own group."""

    lost = False  # this process runs it: never out of reach

    def __init__(
        self, info: NodeInfo, argv: list[str], tag: str, output: OutputOptions, events: queue.SimpleQueue
    ):
        self.info = info
        self.group = LocalGroup(
            info.hostname, argv, tag, output, lambda e: events.put(("exit", info.node, e))
        )

    def start(self, tasks: list[Task], attempt: int) -> None:
        self.group.start(tasks, attempt)

    def stop(self) -> None:
        self.group.stop()

    def finish(self, code: int) -> None:
        pass


class RemoteNode:
    """A node run by an agent (another `launch` process) connected to the coordinator."""

    def __init__(self, channel: Channel, info: NodeInfo, events: queue.SimpleQueue):
        self.info = info
        self.channel = channel
        self.lost = False
        self._events = events
        self._stopped = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            msg = self.channel.recv()
            if msg is None:
                self.lost = True
                self._stopped.set()
                self._events.put(("lost", self.info.node, None))
                return
            if msg.get("t") == "exit":
                fields = {k: msg[k] for k in ("task", "kind", "host", "code", "tail")}
                # An agent that gives no time: this arrival is the best guess.
                fields.update(time=msg.get("time") or time.time(), attempt=msg.get("attempt", 0))
                self._events.put(("exit", self.info.node, Exit(**fields)))
            elif msg.get("t") == "stopped":
                self._stopped.set()

    def start(self, tasks: list[Task], attempt: int) -> None:
        msg = {"t": "start", "attempt": attempt, "tasks": [asdict(t) for t in tasks]}
        if self.lost or not self.channel.send(msg):
            # Nobody will ever report these tasks: end the attempt now rather than wait for them.
            self.lost = True
            self._events.put(("lost", self.info.node, None))

    def stop(self) -> None:
        if self.lost:
            return
        self._stopped.clear()
        if not (self.channel.send({"t": "stop"}) and self._stopped.wait(STOP_GRACE_S + 10.0)):
            # A dead host may keep the connection open for many minutes: no answer means it is gone.
            self.lost = True
            self._events.put(("lost", self.info.node, None))

    def finish(self, code: int) -> None:
        self.channel.send({"t": "finish", "code": code})


class ControlServer:
    """Listens on node 0's ``--master`` address for the other nodes' agents."""

    def __init__(
        self, addr: str, port: int, nnodes: int, expected: set[int], n_ps: int, events: queue.SimpleQueue
    ):
        self.nnodes = nnodes
        self.expected = expected
        self.n_ps = n_ps
        self.events = events
        self.joined: dict[int, RemoteNode] = {}
        self._cond = threading.Condition()
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        self.sock = socket.socket(family)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((addr, port))
        self.sock.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._greet, args=(conn,), daemon=True).start()

    def _greet(self, conn: socket.socket) -> None:
        conn.settimeout(10.0)
        channel = Channel(conn)
        hello = channel.recv()
        conn.settimeout(None)
        problem = None
        if not hello or hello.get("t") != "hello":
            problem = "expected a hello message"
        elif hello.get("nnodes") != self.nnodes or hello.get("n_ps") != self.n_ps:
            problem = (
                f"node 0 runs --nnodes {self.nnodes} --ps {self.n_ps}, "
                f"this node --nnodes {hello.get('nnodes')} --ps {hello.get('n_ps')}"
            )
        elif hello["info"]["node"] not in self.expected:
            problem = f"node rank {hello['info']['node']} is not one this job waits for"
        with self._cond:
            if problem is None and hello["info"]["node"] in self.joined:
                problem = f"node rank {hello['info']['node']} has already joined"
            if problem:
                channel.send({"t": "reject", "reason": problem})
                channel.close()
                return
            info = NodeInfo(**hello["info"])
            self.joined[info.node] = RemoteNode(channel, info, self.events)
            self._cond.notify_all()

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
