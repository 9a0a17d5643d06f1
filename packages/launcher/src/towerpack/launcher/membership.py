"""Elastic membership (``--nnodes MIN:MAX``): the node range, why an attempt started, and the record of
every change of the job's nodes that the summary and the error file list."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass

from towerpack.launcher.errors import UsageError

#: After MIN nodes are there, seconds to wait for more (up to MAX) before an attempt starts.
SETTLE_S = 2.0
#: Seconds a lost node's peers get to answer the pre-emption signal (a rank stuck in a collective with
#: the dead peer will not) before SIGTERM and SIGKILL.
LOSS_GRACE_S = 5.0
#: Default ``--rendezvous-timeout``: seconds to wait for nodes when fewer than MIN are left.
RENDEZVOUS_TIMEOUT_S = 300.0


class ResizeMode(enum.Enum):
    """What an elastic job does when a node is lost or joins (``--resize``)."""

    IN_PLACE = "in-place"  # the ranks that can keep their process and regroup; the others restart
    RESTART = "restart"  # every rank checkpoints, stops and starts again at the new size


@dataclass(frozen=True)
class NodeRange:
    """``--nnodes MIN:MAX``: the job runs on any number of nodes in this range."""

    min_nodes: int
    max_nodes: int

    @classmethod
    def parse(cls, text: str) -> NodeRange | None:
        """``"2:4"`` -> NodeRange(2, 4); ``"3"`` -> None (a fixed size); anything else a UsageError."""
        lo, sep, hi = text.partition(":")
        try:
            low, high = int(lo), int(hi if sep else lo)
        except ValueError:
            raise UsageError(f"--nnodes expects N or MIN:MAX, got {text!r}") from None
        if low < 1 or high < low:
            raise UsageError(f"--nnodes MIN:MAX needs 1 <= MIN <= MAX, got {text!r}")
        return cls(low, high) if sep else None

    def __str__(self) -> str:
        return f"{self.min_nodes}:{self.max_nodes}"


class StartReason(enum.Enum):
    """Why an attempt started: given to every task as ``TOWERPACK_RESTART_REASON`` (elastic jobs)."""

    START = "start"  # the first attempt
    FAILURE = "failure"  # a task failed (counts against --max-restarts)
    MEMBERSHIP = "membership"  # nodes were lost or joined (does not count)


class ChangeReason(enum.Enum):
    """Why a node left or entered the job."""

    JOINED = "joined"  # a launcher joined (at start, or while the job ran)
    LOST = "lost"  # its launcher's connection closed
    SILENT = "silent"  # no heartbeat for --heartbeat-timeout
    FAILED = "failed"  # its launcher broke the protocol (or failed otherwise)


@dataclass(frozen=True)
class MembershipChange:
    """One node leaving or entering the job; world sizes count worker processes (ranks)."""

    time: float  # time.time()
    node: int  # the node's id in this job (0: the coordinator; others in join order, never reused)
    host: str
    reason: ChangeReason
    detail: str
    old_world: int
    new_world: int

    def describe(self) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(self.time))
        what = (
            "joined" if self.reason is ChangeReason.JOINED else f"left ({self.reason.value}: {self.detail})"
        )
        return (
            f"{when} node {self.node} ({self.host}) {what}; world size {self.old_world} -> {self.new_world}"
        )

    def to_json(self) -> dict:
        return {
            "time": self.time,
            "node": self.node,
            "host": self.host,
            "reason": self.reason.value,
            "detail": self.detail,
            "old_world_size": self.old_world,
            "new_world_size": self.new_world,
        }
