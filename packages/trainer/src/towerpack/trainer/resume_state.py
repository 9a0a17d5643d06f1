"""Exact resume: what a checkpoint records of where training stands, and where a resumed run continues.

With ``TrainConfig(exact_resume=True)`` every checkpoint ``<prefix>`` gets a record
``<prefix>.position.json`` (:class:`ResumeRecord`): the trainer's position (global step, epoch, steps
of that epoch done) and the data's (a :class:`~towerpack.dataflow.resume.position.DataPosition`: which part
of the data epochs the ranks trained on). A JSON file next to the checkpoint rather than a variable in
it: the graph and the checkpoint's variables stay the same with and without the switch (checkpoints
load the same either way), tools without TensorFlow (a launcher restarting a job) can read it, and it
is written before the ``checkpoint`` pointer moves, so the checkpoint the pointer names always has it.

What counts is what was trained on, not what was prefetched: the trainer's steps in this process
times the datapoints one step takes (one per tower). :class:`PositionKeeper` turns that into a
record, in the tracker's tag mode (items carry their positions: one rank counts its own, and ranks
that all-reduce add up theirs step by step, :mod:`.position_exchange`) or, for ranks without an
all-reduce, by replaying every rank's stream; :func:`resume_step` says where the resumed epoch
continues, also at another world size. Records of format 1 (before epochs could overlap in a
position) load unchanged.

A job resized in place moves what it has trained on between ranks as bytes
(:meth:`PositionKeeper.state_bytes`, :meth:`~PositionKeeper.load_state_bytes`), and each rank's keeper
goes on with a tracker made anew for its new placement (:meth:`PositionKeeper.restart`, driven by
:mod:`towerpack.trainer.resize.input_restart`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from towerpack.dataflow.resume.ledger import Ledger
from towerpack.dataflow.resume.position import DataPosition
from towerpack.dataflow.resume.tracker import PositionMode, PositionTracker

from . import logger
from .position_exchange import PositionExchange

__all__ = [
    "RECORD_SUFFIX",
    "PositionKeeper",
    "ResumeRecord",
    "TrainerPosition",
    "position_mode",
    "resume_step",
]

#: The record of checkpoint ``<prefix>`` is the file ``<prefix>` + RECORD_SUFFIX``.
RECORD_SUFFIX = ".position.json"
_FORMAT = 2
#: Formats this version reads (1: no later epochs in the data position).
_READS = (1, 2)
#: What :meth:`PositionKeeper.state_bytes` writes: its kind and format.
_STATE_KIND = "towerpack position keeper state"
_STATE_FORMAT = 1


def position_mode(world_size: int, ranks_in_step: int) -> PositionMode:
    """How a rank of ``world_size`` ranks reading the data keeps count: ``TAGS`` alone, or when the
    ranks train in step (``ranks_in_step``, the trainer's ``size``: they all-gather their tags);
    ``REPLAY`` otherwise."""
    return PositionMode.TAGS if world_size == 1 or ranks_in_step == world_size else PositionMode.REPLAY


@dataclass(frozen=True)
class TrainerPosition:
    """Where the training loop stood when a checkpoint was saved."""

    global_step: int
    epoch: int  # the epoch the checkpoint was saved in
    step_in_epoch: int  # steps of that epoch done (steps_per_epoch: the epoch had finished)
    steps_per_epoch: int

    def __post_init__(self) -> None:
        if self.epoch < 1 or self.steps_per_epoch < 0 or not 0 <= self.step_in_epoch <= self.steps_per_epoch:
            raise ValueError(f"inconsistent trainer position {self}")

    @property
    def epoch_finished(self) -> bool:
        return self.step_in_epoch >= self.steps_per_epoch


@dataclass(frozen=True)
class ResumeRecord:
    """What a checkpoint records of where training stands, next to it as ``<prefix>.position.json``.

    ``data_follows_epochs``: the trainer's epochs were the data's epochs at the save (an epoch of steps
    took one data epoch, and the trainer's epoch started where a data epoch did), so a resume can count
    the steps left in the epoch from the data.
    """

    trainer: TrainerPosition
    data: DataPosition
    datapoints_per_step: int
    world_size: int
    data_follows_epochs: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "trainer": asdict(self.trainer),
            "data": self.data.to_dict(),
            "datapoints_per_step": self.datapoints_per_step,
            "world_size": self.world_size,
            "data_follows_epochs": self.data_follows_epochs,
        }

    @classmethod
    def from_json(cls, obj: Any, where: str = "the record") -> ResumeRecord:
        if not isinstance(obj, dict) or obj.get("format") not in _READS:
            got = obj.get("format") if isinstance(obj, dict) else type(obj).__name__
            raise ValueError(
                f"{where} is not a resume record of a format this version reads ({_READS}, got {got!r})"
            )
        try:
            return cls(
                trainer=TrainerPosition(**{k: int(v) for k, v in obj["trainer"].items()}),
                data=DataPosition.from_dict(obj["data"]),
                datapoints_per_step=int(obj["datapoints_per_step"]),
                world_size=int(obj["world_size"]),
                data_follows_epochs=bool(obj["data_follows_epochs"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{where} is not a valid resume record: {e}") from e

    def write(self, prefix: str) -> str:
        """Write the record of checkpoint ``prefix`` (replaced atomically); returns its path."""
        path = prefix + RECORD_SUFFIX
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f, indent=1)
        os.replace(tmp, path)
        return path

    @classmethod
    def read(cls, prefix: str) -> ResumeRecord | None:
        """The record of checkpoint ``prefix``, or None if it has none; ValueError if it is damaged."""
        path = prefix + RECORD_SUFFIX
        try:
            with open(path, encoding="utf-8") as f:
                obj = json.load(f)
        except FileNotFoundError:
            return None
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON: {e}") from e
        return cls.from_json(obj, path)


class PositionKeeper:
    """The trainer's side of position tracking: the tracker of the dataflow it trains on, the count
    of datapoints trained since the tracker started, and the record of a checkpoint.

    ``mode``: ``TAGS`` for one rank, or ranks that all-reduce (their tags are exchanged with every
    step by :meth:`callback`'s :class:`~.position_exchange.PositionExchange`); ``REPLAY`` otherwise.
    """

    def __init__(
        self,
        tracker: PositionTracker,
        datapoints_per_step: int,
        world_size: int,
        mode: PositionMode = PositionMode.REPLAY,
    ):
        self.tracker = tracker
        self.datapoints_per_step = int(datapoints_per_step)
        self.world_size = int(world_size)
        self.mode = mode
        #: The input source that reads the tracked dataflow (it iterates through the tracker).
        self.source = None
        #: Tag mode with several ranks: the job's items, added up step by step on every rank.
        self.ledger: Ledger | None = None
        #: The trainer's count of datapoints trained (``for_trainer`` sets it), for :meth:`state_bytes`.
        self.count_trained: Callable[[], int] | None = None
        #: Whether :meth:`callback`'s exchange all-gathers the ranks' tags into :attr:`ledger` every step
        #: (made for several ranks; it goes on when their number changes in place).
        self.gathers = False
        #: What the job trained on as another rank's keeper said (:meth:`load_state_bytes`), until the
        #: next :meth:`restart` continues it.
        self.loaded: DataPosition | None = None

    @classmethod
    def for_trainer(cls, trainer) -> PositionKeeper:
        """Track the DataFlow the trainer's input source reads; a clear error if there is not one."""
        sources = trainer.input_sources()
        flows, readers = [], []
        for s in sources:
            ds = getattr(s, "ds", None)
            if ds is not None and hasattr(ds, "reset_state") and all(ds is not f for f in flows):
                flows.append(ds)
                readers.append(s)
        if len(flows) != 1:
            names = ", ".join(type(s).__name__ for s in sources) or "none"
            raise ValueError(
                "exact_resume=True needs the trainer to read one DataFlow (through FeedInput, QueueInput "
                f"or ZMQInput); it reads {len(flows)} (input sources: {names})"
            )
        tracker = PositionTracker.of(flows[0])
        world = tracker.world_size  # ranks reading the data
        keeper = cls(tracker, max(1, len(trainer.devices)), world, position_mode(world, trainer.size))
        keeper.source = readers[0]
        keeper.count_trained = trainer.datapoints_trained
        return keeper

    def callback(self) -> PositionExchange | None:
        """The callback that keeps the count in tag mode (exchanging tags between ranks), or None."""
        if self.mode is not PositionMode.TAGS:
            return None
        self.gathers = self.world_size > 1
        return PositionExchange(self)

    def start(self, position: DataPosition | None) -> None:
        """Start the tracker at ``position`` (before the DataFlow is reset) and the input source
        reading through it."""
        self._start(position, 0)

    def restart(
        self, tracker: PositionTracker, mode: PositionMode, position: DataPosition, trained: int
    ) -> None:
        """Go on at ``position`` (the job's) with ``tracker``, the same DataFlow's made anew for this
        process's new placement, in ``mode``: an input restarted in place at another world size
        (:mod:`towerpack.trainer.resize.input_restart`), before the DataFlow's runners start again.
        ``trained``: the trainer's count of datapoints trained so far, which goes on counting."""
        self.tracker, self.world_size, self.mode, self.loaded = tracker, tracker.world_size, mode, None
        self._start(position, trained)

    def _start(self, position: DataPosition | None, trained: int) -> None:
        self.tracker.start(position, self.mode, trained_before=trained)
        follow = getattr(self.source, "follow_positions", None)
        if self.mode is not PositionMode.TAGS:
            self.ledger = None
            if follow is not None:  # a restart in replay mode: the source reads the DataFlow itself
                follow(None)
            return
        self.ledger = Ledger(position, self.tracker.size)
        if follow is None:
            raise ValueError(
                f"exact_resume=True: {type(self.source).__name__} cannot log the positions of the "
                "datapoints it reads; use FeedInput, QueueInput or ZMQInput"
            )
        follow(self.tracker)

    def why_cannot_restart(self, world_size: int, mode: PositionMode) -> str | None:
        """Why this keeper cannot go on counting for ``world_size`` ranks in ``mode`` after a restart in
        place (None: it can). Ranks in step learn each other's items only through the exchange built
        into the graph at the start, which all-gathers for any number of ranks once made for several."""
        if mode is PositionMode.TAGS and world_size > 1 and not self.gathers:
            return (
                f"exact_resume: {world_size} ranks in step would need to exchange what they train on, but "
                "this rank's graph has no exchange (it started alone or replaying)"
            )
        if mode is PositionMode.REPLAY and self.gathers:
            return (
                "exact_resume: this rank's graph exchanges the tags of ranks in step, but the new placement "
                "makes it replay (its trainer no longer trains in step with all the ranks)"
            )
        return None

    def datapoints_per_epoch(self) -> int | None:
        return self.tracker.datapoints_per_epoch()

    def follows_epochs(self, steps_per_epoch: int) -> bool:
        """Whether an epoch of ``steps_per_epoch`` steps takes exactly one data epoch of this rank."""
        per_epoch = self.datapoints_per_epoch()
        return per_epoch is not None and steps_per_epoch * self.datapoints_per_step == per_epoch

    def steps_done(self, position: DataPosition, steps_per_epoch: int) -> int:
        """Steps of an epoch of ``steps_per_epoch`` that ``position`` leaves done, for an epoch of steps
        that takes one data epoch: as many are left as this rank's data left of it takes (rounded up: a
        last step may take a datapoint of the next data epoch)."""
        left = math.ceil(self.tracker.remaining(position) / self.datapoints_per_step)
        return max(0, steps_per_epoch - left)

    @property
    def _by_ledger(self) -> bool:
        """Whether the job's position is :attr:`ledger`'s: ranks in step add up their items in it."""
        return self.mode is PositionMode.TAGS and (self.world_size > 1 or self.gathers)

    def position(self, datapoints_trained: int) -> DataPosition:
        """The job's data position after this rank trained on ``datapoints_trained`` since the start."""
        if self._by_ledger:
            ledger = self.ledger
            if ledger.size is None and self.tracker.size is not None:
                ledger.set_size(self.tracker.size)
            return ledger.position()
        if self.loaded is not None:
            return self.loaded
        return self.tracker.position(datapoints_trained)

    def state_bytes(self) -> bytes:
        """What the job has trained on, as this rank knows it, for another rank's :meth:`load_state_bytes`
        (ranks resized in place all take the state of one of them)."""
        if self._by_ledger or self.loaded is not None:
            data = self.position(0)  # the count does not matter
        elif self.count_trained is None:
            raise RuntimeError(
                "PositionKeeper.state_bytes(): a keeper that counts from the trainer's steps needs the "
                "trainer's count (PositionKeeper.for_trainer sets it)"
            )
        else:
            data = self.position(self.count_trained())
        state = {"kind": _STATE_KIND, "format": _STATE_FORMAT, "position": data.to_dict()}
        return json.dumps(state, separators=(",", ":")).encode()

    def load_state_bytes(self, data: bytes) -> None:
        """Take another rank's :meth:`state_bytes` as what the job has trained on (they came from
        another process: anything else is a ``ValueError`` naming what is wrong with it)."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"load_state_bytes() takes bytes, got {type(data).__name__}")
        try:
            state = json.loads(bytes(data).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise ValueError(f"not a position keeper's state (unreadable as UTF-8 JSON: {e})") from None
        if not isinstance(state, dict) or state.get("kind") != _STATE_KIND:
            raise ValueError("not a position keeper's state (no kind marking one)")
        got = state.get("format")
        if got != _STATE_FORMAT:
            raise ValueError(f"a position keeper's state of format {got!r}, not {_STATE_FORMAT}")
        try:
            position = DataPosition.from_dict(state.get("position"))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"a position keeper's state with a bad position: {e}") from None
        if self.tracker.size is not None:
            position.check_size(self.tracker.size, "this rank's dataset")
        self.loaded = position
        if self._by_ledger:  # the exchange goes on adding to it
            self.ledger = Ledger(position, position.size)

    def record(self, trainer: TrainerPosition, datapoints_trained: int) -> ResumeRecord:
        """The record of a checkpoint saved at ``trainer`` after ``datapoints_trained`` since start."""
        data = self.position(datapoints_trained)
        follows = self.follows_epochs(trainer.steps_per_epoch) and not data.later
        if follows and 0 < trainer.step_in_epoch < trainer.steps_per_epoch:
            left = (trainer.steps_per_epoch - trainer.step_in_epoch) * self.datapoints_per_step
            follows = self.tracker.remaining(data) == left
        return ResumeRecord(trainer, data, self.datapoints_per_step, self.world_size, follows)


def resume_step(record: ResumeRecord, keeper: PositionKeeper, steps_per_epoch: int) -> tuple[int, int]:
    """``(epoch, step)`` where a run resumed from ``record`` continues, ``steps_per_epoch`` steps an epoch.

    When the trainer's epochs follow the data's (then and now), the epoch has as many steps left as the
    data this rank has left of it takes (rounded up: a last step may take a datapoint of the next data
    epoch), which is what changes with the world size. Otherwise the same fraction of the epoch is done.
    """
    old = record.trainer
    if old.epoch_finished:
        return old.epoch + 1, 0
    if record.data_follows_epochs and keeper.follows_epochs(steps_per_epoch):
        step = keeper.steps_done(record.data, steps_per_epoch)
    elif old.steps_per_epoch == steps_per_epoch:
        step = old.step_in_epoch
    else:
        step = round(old.step_in_epoch * steps_per_epoch / old.steps_per_epoch)
        logger.warning(
            "Resuming: epoch %d had %d of %d steps done; with %d steps per epoch it continues at step %d",
            old.epoch,
            old.step_in_epoch,
            old.steps_per_epoch,
            steps_per_epoch,
            step,
        )
    if step >= steps_per_epoch:
        return old.epoch + 1, 0
    return old.epoch, step
