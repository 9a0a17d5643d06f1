"""The protocol a pipeline stage implements to take part in exact resume.

Every DataFlow has it (:class:`Resumable` is a base of :class:`~towerpack.dataflow.DataFlow`), and a
stage that says nothing cannot be resumed. A stage takes part by saying three things about itself:

- :meth:`Resumable.resume_step`: what it does to the positions that flow through it (a
  :class:`Step`: the dataflows it reads, whether it batches, reorders, repeats or runs workers);
  a stage that cannot be resumed raises :class:`PositionUnsupportedError` instead, naming itself and
  the fix (:attr:`Resumable.resume_refusal`);
- :meth:`Resumable.track`: the tracker switches it on, with a :class:`TrackMode` for the whole
  pipeline, before ``reset_state`` (so the mode reaches forked and spawned workers with the stage);
- ``position_tag``: in tag mode, set as it yields a datapoint, the keys of the items that datapoint
  is made of (:mod:`towerpack.dataflow.resume.keys`). The stage after it reads its input's
  ``position_tag`` right after taking a datapoint.

A source (:class:`~towerpack.dataflow.resume.position.PositionSource`) continues a position
instead: :meth:`start_at` with a :class:`SourceStart`. The tracker
(:mod:`towerpack.dataflow.resume.tracker`) drives all of it and knows no stage by its class.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from .position import DataPosition
    from .replay import Tracking
    from .split import Units

__all__ = [
    "Batch",
    "PositionUnsupportedError",
    "Resumable",
    "SourceStart",
    "Step",
    "StepKind",
    "TrackMode",
    "refusal",
    "step_of",
]


class PositionUnsupportedError(ValueError):
    """A dataflow cannot track its exact position; the message names the stage and why."""


class StepKind(enum.Enum):
    """What a stage is to position tracking."""

    #: Continues a position: reads what it leaves of each epoch, gives every item its key.
    SOURCE = "source"
    #: Makes its datapoints from its input's (maps, batches, shuffles).
    STAGE = "stage"
    #: Runs copies of its input in workers and merges what they yield.
    RUNNER = "runner"
    #: Reads from `dataflow serve` servers, which track the position themselves.
    REMOTE = "remote"


@dataclass(frozen=True)
class Batch:
    """A stage that makes one datapoint of ``size`` of its input's (a partial last one if ``remainder``)."""

    size: int
    remainder: bool

    def up(self, n: int) -> int:
        """Datapoints out of ``n`` in."""
        return n // self.size + int(self.remainder and n % self.size > 0)


@dataclass(frozen=True)
class Step:
    """What one stage of a pipeline does to the positions that flow through it."""

    kind: StepKind = StepKind.STAGE
    #: The dataflows it reads: one, or one per thread of a thread runner (each continues the position).
    inputs: tuple[Any, ...] = ()
    batch: Batch | None = None
    #: Why replaying cannot follow the order of its datapoints (None: it keeps an order).
    unordered: str | None = None
    #: Why its datapoints per epoch do not follow from its input's (None: they do).
    uncounted: str | None = None
    #: It iterates its input again and again (a resume may find whole passes empty).
    repeats: bool = False
    #: A runner: the copies of its input that run at once.
    workers: int = 1


@dataclass(frozen=True)
class TrackMode:
    """How the tracker switched a pipeline on; every stage of it gets the same one."""

    #: Tag mode: every datapoint carries the keys of its items as its stage's ``position_tag``.
    tags: bool = False
    #: Empty passes in a row a repeating stage may meet (a resume that finds epochs done).
    empty_passes: int = 0
    #: Replaying: what a runner checks of its workers' passes (None: not replaying).
    replay: Tracking | None = None


#: The mode of a stage that no tracker switched on.
OFF = TrackMode()


@dataclass(frozen=True)
class SourceStart:
    """Where a source starts: the position it continues and how its epochs are split."""

    position: DataPosition
    units: Units
    tags: bool = False
    #: Data servers: a rank keeps its part of every whole epoch, less what ``position`` holds.
    fixed_ranks: bool = False


class Resumable:
    """The resume side of every DataFlow; by default a stage that cannot be resumed."""

    #: Why this class cannot be resumed and what to use instead (None: the general reason).
    resume_refusal: ClassVar[str | None] = None
    #: Tag mode: the keys of the items of the datapoint this stage yielded last.
    position_tag: Any = None
    _track: TrackMode = OFF

    def resume_step(self) -> Step:
        """What this stage does to positions; raises :class:`PositionUnsupportedError` if it cannot
        be resumed."""
        raise refusal(self)

    def track(self, mode: TrackMode) -> None:
        """Switch tracking on (called by the tracker before ``reset_state``)."""
        self._track = mode

    @property
    def track_mode(self) -> TrackMode:
        return self._track


def refusal(stage: Any) -> PositionUnsupportedError:
    """The error that says ``stage`` cannot be resumed, with its own reason where it gives one."""
    name = type(stage).__name__
    why = getattr(stage, "resume_refusal", None)
    if why is not None:
        return PositionUnsupportedError(f"exact data position: the stage {name} is not supported: {why}")
    return PositionUnsupportedError(
        f"exact data position: the stage {name} is not supported (it may drop, repeat or reorder "
        "datapoints, or read a source whose order is not a function of the seed and epoch); see the "
        "table in docs/dataflow.md, 'Exact resume', for the stages that are"
    )


def step_of(node: Any) -> Step:
    """``node``'s :class:`Step`; raises :class:`PositionUnsupportedError` when it cannot be resumed
    (anything that is not a DataFlow cannot)."""
    if not isinstance(node, Resumable):
        raise refusal(node)
    return node.resume_step()
