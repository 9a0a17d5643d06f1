"""The control port of an elastic job's node: every node listens on one, so that any of them can take over
from a lost coordinator, and a joining launcher can ask any of them where the coordinator is."""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable

from towerpack.launcher import net
from towerpack.launcher.admission import ControlServer, Problem, check_info
from towerpack.launcher.errors import Refusal
from towerpack.launcher.events import NodeJoined
from towerpack.launcher.nodes import NodeState, RemoteNode
from towerpack.launcher.plan import elastic_ports
from towerpack.launcher.protocol import Connection, Join, Members
from towerpack.launcher.spec import LaunchSpec

__all__ = ["ElasticServer", "Standing"]


class Standing(enum.Enum):
    """What an elastic job's node answers a launcher that connects to its control port."""

    COORDINATING = "coordinating"  # admits it (the coordinator)
    FOLLOWING = "following"  # sends it to the coordinator (ELSEWHERE)
    SEEKING = "seeking"  # BUSY: it lost its coordinator and is finding the next one


class ElasticServer(ControlServer):
    """The control port of an elastic job's node: every node listens, so that any of them can take over
    from a lost coordinator and a joining launcher can ask any of them where the coordinator is.

    Coordinating, it admits any agent of the same job (same MIN:MAX, ``--ps`` and backend) while the job
    has fewer than MAX nodes, members and newcomers together; each gets the next node id (never
    reused), except a member of the membership it took over (``coordinate``), which keeps its id.
    """

    def __init__(
        self, spec: LaunchSpec, addr: str, port: int, welcome, events, standing=Standing.COORDINATING
    ):
        self.spec = spec  # before the server starts: its first agent may come at once
        self.standing = standing
        self.me = 0  # this node's id
        self.next_id = 1
        self.rejoining: frozenset[int] = frozenset()  # members of the membership taken over
        self._leader = "node 0"  # whom ELSEWHERE names
        super().__init__(addr, port, spec.secret, spec.nnodes, set(), spec.n_ps, welcome, events)

    def follow(self, addr: str, port: int, who: str) -> None:
        """Send joining launchers to the coordinator ``who`` at ``addr:port``."""
        with self._cond:
            self.standing, self.elsewhere, self._leader = Standing.FOLLOWING, (addr, port), who

    def seek(self) -> None:
        with self._cond:
            self.standing = Standing.SEEKING

    def coordinate(self, last: Members) -> None:
        """Take over from the coordinator of ``last``: its members may rejoin with their ids."""
        ids = {m.node for m in last.members}
        with self._cond:
            self.me, self.rejoining = last.you, frozenset(ids - {last.you})
            self.next_id = max(self.next_id, last.next_id, max(ids) + 1)
            self.standing, self.elsewhere = Standing.COORDINATING, None

    def _worth_saying(self, refusal: Refusal) -> bool:
        return self.standing is Standing.COORDINATING  # a node that does not coordinate only redirects

    def live(self) -> list[RemoteNode]:
        """The agents still connected, in join order."""
        return [n for n in self.joined.values() if n.state is NodeState.REACHABLE]

    def _check(self, join: Join) -> Problem | None:
        if self.standing is Standing.FOLLOWING:
            where = net.host_port(*self.elsewhere)
            return Refusal.ELSEWHERE, f"{self._leader} coordinates this job, at {where}"
        if self.standing is Standing.SEEKING:
            return Refusal.BUSY, "this node lost the job's coordinator and is finding the next one"
        spec, r = self.spec, self.spec.elastic
        if (join.min_nodes, join.max_nodes, join.n_ps, join.backend) != (
            r.min_nodes,
            r.max_nodes,
            spec.n_ps,
            spec.backend.value,
        ):
            theirs = f"{join.min_nodes}:{join.max_nodes}" if join.max_nodes else str(join.nnodes)
            return Refusal.MISMATCH, (
                f"node {self.me} runs --nnodes {r} --ps {spec.n_ps} --backend {spec.backend.value}, "
                f"this node --nnodes {theirs} --ps {join.n_ps} --backend {join.backend or '?'}"
            )
        if join.member in self.joined:  # its earlier connection may not have ended here yet
            return Refusal.BUSY, f"node {join.member} has already joined"
        if len(self.live()) + 1 >= r.max_nodes:
            return Refusal.FULL, f"the job already runs on its maximum of {r.max_nodes} node(s)"
        problem = check_info(join.info, elastic_ports(join.info.slots, spec.n_ps))
        return (Refusal.MISMATCH, problem) if problem else None

    def _admit(self, conn: Connection, join: Join) -> None:
        if join.member in self.rejoining:
            node = join.member
        else:
            node, self.next_id = self.next_id, self.next_id + 1
        info = dataclasses.replace(join.info, node=node)
        self.joined[node] = RemoteNode(conn, info, self.events, self.welcome)
        self.events.put(NodeJoined(node))

    def wait_until(self, done: Callable[[], bool], timeout: float, abort) -> bool:
        """Wait up to ``timeout`` s for ``done()`` (checked as agents come and go); ``abort()`` may raise."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not done() and time.monotonic() < deadline:
                abort()
                self._cond.wait(0.1)
            return done()

    def wait_for(self, count: int, timeout: float, abort, settle: float = 0.0) -> int:
        """Wait up to ``timeout`` s until ``count`` agents are connected, then up to ``settle`` s more for
        others (up to MAX); returns how many are connected. ``abort()`` may raise to give up."""
        most = self.spec.elastic.max_nodes - 1
        if self.wait_until(lambda: len(self.live()) >= count, timeout, abort):
            self.wait_until(lambda: len(self.live()) >= most, settle, abort)
        return len(self.live())
