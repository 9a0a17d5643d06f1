"""What a launcher's supervising loop reacts to: one small dataclass per kind of event.

Threads (process waiters, connection readers, signal handlers, ssh watchers) put events on one
``queue.SimpleQueue``; the coordinator's or agent's main loop takes them off in order.
"""

from __future__ import annotations

from dataclasses import dataclass

from towerpack.launcher.membership import ChangeReason
from towerpack.launcher.protocol import Loss
from towerpack.launcher.tasks import Exit


@dataclass(frozen=True)
class SignalReceived:
    """This launcher received ``signal`` (one of :data:`towerpack.launcher.signals.HANDLED`)."""

    signal: int


@dataclass(frozen=True)
class TaskEnded:
    """A task of ``node`` ended on its own (exits caused by a stop are not reported)."""

    node: int
    exit: Exit


@dataclass(frozen=True)
class NodeLost:
    """The coordinator can no longer reach ``node``'s launcher; ``last_heard`` is ``time.time()``."""

    node: int
    why: str
    last_heard: float
    reason: ChangeReason = ChangeReason.LOST


@dataclass(frozen=True)
class NodeJoined:
    """An agent joined a running elastic job as ``node`` (see :mod:`towerpack.launcher.elastic`)."""

    node: int


@dataclass(frozen=True)
class NodeSignalled:
    """``node``'s launcher received ``signal`` and passed it to its workers."""

    node: int
    signal: int


@dataclass(frozen=True)
class NodeStopped:
    """``node`` finished stopping its processes (or is lost, so there is nothing to wait for);
    ``killed`` workers outlived the grace period of a forwarded signal."""

    node: int
    killed: int = 0


@dataclass(frozen=True)
class NodeAgreed:
    """``node`` holds the membership of ``epoch`` (elastic jobs)."""

    node: int
    epoch: int


@dataclass(frozen=True)
class RanksChanged:
    """What the ranks of ``node`` say of resizing in place has changed (elastic jobs)."""

    node: int


@dataclass(frozen=True)
class NodeProbed:
    """``node`` tried to reach the other nodes; ``problems`` names those it could not."""

    node: int
    problems: tuple[str, ...]


@dataclass(frozen=True)
class Message:
    """An agent's view: a message from the coordinator."""

    msg: object


@dataclass(frozen=True)
class CoordinatorLost:
    """An agent's view: the coordinator is gone; ``why`` says how (``loss``: its connection's end)."""

    why: str
    loss: Loss | None = None


@dataclass(frozen=True)
class LocalStopDone:
    """An agent's view: the stop of its processes has finished; ``killed`` workers outlived the grace."""

    killed: int = 0
