"""The coordinator's side of resizing an elastic Horovod job in place (``--resize in-place``, the default).

The ranks say through their node's resize files (:mod:`towerpack.utils.resize_files`) whether they can
regroup; the coordinator hears it from each node (``Ranks``). When a member node is lost or a node joins and
every rank of every member said it can, nothing is stopped:

- **lost**: the survivors (a quorum, at least MIN) agree to the new membership, the Gloo store is emptied,
  and every surviving node gets the plan (``Resize``): each rank's new ``RANK``, ``WORLD_SIZE`` and
  ``HOROVOD_*``. The ranks, whose collective step failed, take it and regroup.
- **joined**: the newcomer agrees to the membership and its ranks start with the plan's places and
  ``TOWERPACK_RESIZE_JOIN=1``: they build their graph and session while the others train, then say they wait;
  only then does every node get the plan, and the others pause at their next step for the regroup.

Once every rank says it is at the plan's generation the resize is over. A rank that fails, a node lost while
a join or a regroup is under way, or a regroup that does not end within ``regroup_timeout`` ends the attempt:
every rank restarts from its checkpoint, as a change of nodes did before (and still does for ranks that
cannot regroup).
"""

from __future__ import annotations

import dataclasses
import enum
import time
from dataclasses import dataclass, field

from towerpack.launcher.console import say
from towerpack.launcher.plan import Backend, JobConfig, build_tasks
from towerpack.launcher.tasks import Task, TaskKind
from towerpack.utils import resize_files as rf

__all__ = ["InPlace", "Phase", "offered", "rank_env"]

#: Seconds past the heartbeat timeout a rank whose collective failed waits for the plan; the regroup of
#: a silent node's survivors may wait that long in Gloo (``HOROVOD_GLOO_TIMEOUT_SECONDS``) first.
WAIT_SLACK_S = 30.0
#: Seconds past the heartbeat timeout that Horovod's Gloo waits for a peer (``HOROVOD_GLOO_TIMEOUT_SECONDS``).
GLOO_SLACK_S = 5.0


class Phase(enum.Enum):
    STEADY = "steady"  # no resize under way
    JOINING = "joining"  # new nodes' ranks build their graphs; the others train on
    REGROUPING = "regrouping"  # a plan is out; waiting for every rank to take it


def offered(spec) -> bool:
    """Whether this job offers its ranks resizes in place (they still say whether they can)."""
    from towerpack.launcher.membership import ResizeMode

    return spec.elastic is not None and spec.backend is Backend.HOROVOD and spec.resize is ResizeMode.IN_PLACE


def rank_env(heartbeat_timeout: float) -> dict[str, str]:
    """What the ranks of a job that offers resizes in place get on top of their usual variables. A silent
    peer fails a collective ``GLOO_SLACK_S`` after the launcher noticed it gone (the ranks meet at a barrier
    before ``hvd.init()``, so that the timeout need not cover how far apart they start)."""
    gloo = heartbeat_timeout + GLOO_SLACK_S
    return {
        rf.WAIT_VAR: f"{gloo + heartbeat_timeout + WAIT_SLACK_S:g}",
        "HOROVOD_GLOO_TIMEOUT_SECONDS": f"{gloo:g}",
    }


@dataclass
class Resizing:
    """One resize under way: why, since when, its generation, the nodes that join."""

    why: str
    began: float
    generation: int = 0
    joiners: list = field(default_factory=list)
    planned: float = 0.0  # when the plan went out


class InPlace:
    """The resizes in place of one attempt; the coordinator (``coord``) calls it from its event loop."""

    def __init__(self, coord, attempt: int, cfg: JobConfig, extra: dict[str, str], regroup_timeout: float):
        self.coord, self.attempt, self.cfg, self.extra = coord, attempt, cfg, dict(extra)
        self.regroup_timeout = regroup_timeout
        self.generation = 0
        self.phase = Phase.STEADY
        self.resizing: Resizing | None = None
        #: How long each finished resize took: (why, seconds from the change to the plan, to the end).
        self.done: list[tuple[str, float, float]] = []

    # -- what the ranks say -------------------------------------------------------------------------
    def _states(self, node) -> list[rf.SlotState]:
        return list(node.rank_states(self.attempt))

    def _all(self, nodes, state: rf.RankState, generation: int) -> bool:
        for node in nodes:
            states = self._states(node)
            if len(states) < node.info.slots:
                return False
            if any(s.state is not state or s.generation != generation for s in states):
                return False
        return True

    def cannot(self, gone: tuple = ()) -> str | None:
        """Why the members (but ``gone``) cannot resize in place now (None: they can)."""
        if self.phase is not Phase.STEADY:
            return f"a resize is under way ({self.phase.value})"
        nodes = [n for n in self.coord.nodes if n not in gone]
        for node in nodes:
            for s in self._states(node):
                if s.state is rf.RankState.CANNOT:
                    return f"a rank of {self.coord._node_name(node.info.node)} cannot: {s.reason}"
        if not self._all(nodes, rf.RankState.READY, self.generation):
            return "not every rank has said it can regroup"
        return None

    # -- changes ------------------------------------------------------------------------------------
    def lost(self, gone: list) -> bool:
        """Members ``gone`` were lost: regroup the others in place (True), or say why not (False: restart)."""
        coord = self.coord
        why = self.cannot(tuple(gone))
        survivors = [n for n in coord.nodes if n not in gone]
        ids = {n.info.node for n in survivors}
        if why is None and (coord.quorum is not None and not coord.quorum.met_by(ids)):
            why = "the nodes left are no quorum"
        if why is None and len(survivors) < coord.spec.elastic.min_nodes:
            why = f"fewer than {coord.spec.elastic.min_nodes} node(s) are left"
        if why is not None:
            say(f"cannot resize in place ({why}); restarting every rank")
            return False
        self.resizing = Resizing("lost", time.monotonic())
        for node in gone:
            coord.drop_member(node)
        if not self._agree():
            return False
        self._plan()
        return True

    def joined(self, newcomers: list) -> bool:
        """Nodes joined: start their ranks with the next plan's places while the others train (True), or
        say why not (False: restart)."""
        coord = self.coord
        why = self.cannot()
        if why is not None:
            say(f"cannot resize in place ({why}); restarting every rank to take the new node(s) in")
            return False
        room = coord.spec.elastic.max_nodes - len(coord.nodes)
        joiners = newcomers[:room]
        if not joiners:
            return True
        self.resizing = Resizing("joined", time.monotonic(), joiners=joiners)
        for node in joiners:
            coord.add_member(node)
        if not self._agree():
            return False
        plan = self._tasks({rf.JOIN_VAR: "1", rf.GENERATION_VAR: str(self.generation)})
        for node in joiners:
            node.start(plan[node], self.attempt)
        self.phase = Phase.JOINING
        say(f"{_names(coord, joiners)} joined: starting its ranks, which join the others in place when ready")
        return True

    def ranks_changed(self) -> str | None:
        """A node's ranks said something new: a join whose ranks are ready goes on to the regroup; a regroup
        every rank has taken is over. Returns why the resize under way failed (a rank said it cannot)."""
        r = self.resizing
        if r is not None:
            for node in self.coord.nodes:
                for s in self._states(node):
                    if s.state is rf.RankState.CANNOT:
                        return f"a rank of {self.coord._node_name(node.info.node)} cannot resize: {s.reason}"
        if self.phase is Phase.JOINING and self._all(r.joiners, rf.RankState.JOINING, self.generation):
            self._plan()
        elif self.phase is Phase.REGROUPING and self._all(self.coord.nodes, rf.RankState.READY, r.generation):
            now = time.monotonic()
            world = sum(n.info.slots for n in self.coord.nodes)
            self.done.append((r.why, r.planned - r.began, now - r.began))
            say(
                f"resized in place to world size {world} (generation {r.generation}): the plan went out "
                f"{r.planned - r.began:.2f} s after the change, every rank had regrouped "
                f"{now - r.planned:.2f} s later"
            )
            self.phase, self.resizing = Phase.STEADY, None
        return None

    def overdue(self) -> str | None:
        """Why the resize under way has failed by timing out (None: it has not)."""
        r = self.resizing
        if r is None:
            return None
        limit = self.coord.spec.start_timeout if self.phase is Phase.JOINING else self.regroup_timeout
        since = r.planned if self.phase is Phase.REGROUPING else r.began
        if time.monotonic() - since > limit:
            return f"the resize in place ({r.why}) did not end within {limit:g} s ({self.phase.value})"
        return None

    @property
    def busy(self) -> bool:
        return self.phase is not Phase.STEADY

    def joining(self, node_id: int) -> bool:
        """Whether ``node_id`` is a node whose ranks are still joining."""
        r = self.resizing
        return self.phase is Phase.JOINING and any(n.info.node == node_id for n in r.joiners)

    def world(self) -> int:
        return sum(n.info.slots for n in self.coord.nodes)

    def training(self) -> int:
        """The ranks that train now: the members' but those of nodes still joining."""
        joining = self.resizing.joiners if self.phase is Phase.JOINING else []
        return sum(n.info.slots for n in self.coord.nodes if n not in joining)

    # -- helpers --------------------------------------------------------------------------------------
    def _agree(self) -> bool:
        """The members agree to the new membership (the quorum of a later takeover counts on it)."""
        before = list(self.coord.nodes)
        failed = self.coord.agree_in_place(self.attempt)
        if failed or self.coord.nodes != before:
            say("the membership changed again while resizing in place; restarting every rank")
            return False
        return True

    def _tasks(self, more: dict[str, str] | None = None) -> dict:
        """Every member's tasks at the membership's size, keyed by node object."""
        nodes = list(self.coord.nodes)
        dense = [dataclasses.replace(n.info, node=i) for i, n in enumerate(nodes)]
        plan = build_tasks(dense, self.cfg, self.attempt, dict(self.extra, **(more or {})))
        return {node: plan[i] for i, node in enumerate(nodes)}

    def _plan(self) -> None:
        """Send every member the plan of the next generation (the Gloo store emptied for its rendezvous)."""
        coord, r = self.coord, self.resizing
        self.generation += 1
        r.generation, r.planned = self.generation, time.monotonic()
        if coord.store is not None:
            coord.store.reset(self.world())
        plan = self._tasks()
        for node, tasks in plan.items():
            node.resize(self.attempt, self.generation, _workers(tasks))
        self.phase = Phase.REGROUPING


def _workers(tasks: list[Task]) -> list[Task]:
    return [t for t in tasks if t.kind is TaskKind.WORKER]


def _names(coord, nodes) -> str:
    return ", ".join(coord._node_name(n.info.node) for n in nodes)
