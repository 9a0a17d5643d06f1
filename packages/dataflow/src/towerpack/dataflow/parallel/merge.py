"""How a runner merges its workers' streams into epochs: one policy for worker processes and threads.

The runners (:mod:`towerpack.dataflow.parallel.runners`) differ in how a message reaches them (ZMQ
sockets or queues); what they do with it is this module's :class:`Merge`, in one of three kinds:

- ``EXACT``: the workers' passes make up one epoch of the input, so an epoch ends when every
  worker has ended its pass (a worker that has finished waits, its datapoints held back);
- ``FREE``: every worker runs a full copy of the input (as in the reference), or passes cannot be
  told apart: an epoch is ``len(ds)`` datapoints of the mixed streams, first come first taken;
- ``ROUND_ROBIN``: replaying a position (:mod:`towerpack.dataflow.resume.replay`), the workers are
  taken strictly in turn, so that the stream is a function of the position.

In tag mode every datapoint comes as ``[tag, datapoint]``; the merge stays free or exact and an
iteration abandoned mid-epoch is continued by the next one, where outside tag mode the rest of that
epoch is drained first.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from typing import Any

from ..pipeline.base import DataFlow, dataflow_len
from ..pipeline.stream import mixes_passes
from ..resume.protocol import OFF, TrackMode
from ..wire import control
from ..wire.control import EpochEnd
from .worker_shares import check_worker_shares

__all__ = ["Merge", "MergeKind", "exact_epochs", "plan_epochs"]


class MergeKind(enum.Enum):
    EXACT = "exact"
    FREE = "free"
    ROUND_ROBIN = "round robin"


class _RoundRobin:
    """Whose turn it is, and who has ended the epoch."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.active = list(range(count))
        self.turn = 0

    def current(self) -> int:
        return self.active[self.turn]

    def took(self) -> None:
        """The current worker gave a datapoint: the next one's turn."""
        self.turn = (self.turn + 1) % len(self.active)

    def ended(self) -> bool:
        """The current worker ended its pass; True when that ends the epoch (and starts the next)."""
        del self.active[self.turn]
        if not self.active:
            self.active, self.turn = list(range(self.count)), 0
            return True
        self.turn %= len(self.active)
        return False


class _Epochs:
    """Which workers are still in the current exact epoch."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.active = list(range(count))

    def end(self, index: int) -> bool:
        """Worker ``index`` finished its pass; True when that completes the epoch."""
        self.active.remove(index)
        if self.active:
            return False
        self.active = list(range(self.count))
        return True


def exact_epochs(parent_length: int | None, worker_lengths: list[int | None]) -> bool:
    """Whether the workers' passes make up one epoch of the input (see the module docstring)."""
    if parent_length is None or any(n is None for n in worker_lengths):
        return False
    return sum(worker_lengths) == parent_length


def plan_epochs(runner: str, ds: DataFlow, worker_lengths: list[int | None], tracking: bool) -> bool:
    """Whether epochs are exact, once the workers have reported their lengths.

    Raises ``ValueError`` when no worker would ever send a datapoint (see :func:`check_worker_shares`).
    """
    if not tracking:  # a tracked resume may start with workers whose part of the epoch is done
        check_worker_shares(runner, ds, worker_lengths)
    return exact_epochs(dataflow_len(ds), worker_lengths) and not mixes_passes(ds)


#: A message that is not a datapoint of the epoch.
_SKIP = object()


class Merge:
    """One runner's merge of ``workers`` streams (see the module docstring).

    The runner calls :meth:`decide` once its workers have reported their lengths (replaying decides
    at :meth:`track`), then iterates :meth:`epoch` with a function that returns the next
    ``(worker index, message)`` from the workers it names (None: any).
    """

    def __init__(self, workers: int) -> None:
        self.kind: MergeKind | None = None
        #: Tag mode: the tag of the datapoint :meth:`epoch` yielded last.
        self.tag: Any = None
        self._track = OFF
        self._epochs = _Epochs(workers)
        self._turns = _RoundRobin(workers)
        self._open = False  # an exact epoch was begun and not finished
        self._size: int | None = None
        self._produced = 0

    def track(self, mode: TrackMode) -> None:
        self._track = mode
        if mode.replay is not None:
            self.kind = MergeKind.ROUND_ROBIN

    @property
    def tracked(self) -> bool:
        return self._track.replay is not None or self._track.tags

    def decide(self, runner: str, ds: DataFlow, worker_lengths: list[int | None]) -> None:
        """Exact or free, from the workers' lengths; ``ValueError`` when none would send anything."""
        exact = plan_epochs(runner, ds, worker_lengths, self.tracked)
        self.kind = MergeKind.EXACT if exact else MergeKind.FREE
        self._size = dataflow_len(ds)

    def epoch(
        self,
        next_message: Callable[[list[int] | None], tuple[int, Any]],
        on_pass_end: Callable[[int], None] | None = None,
        on_epoch_end: Callable[[], None] | None = None,
    ) -> Iterator[Any]:
        """The datapoints of one epoch. For threads that wait to be let on: ``on_pass_end(index)`` is
        called when a worker ends a pass of a free merge, ``on_epoch_end()`` when an exact epoch ends."""
        hooks = (on_pass_end, on_epoch_end)
        if self.kind is MergeKind.EXACT and self._open and not self._track.tags:
            for _ in self._one_epoch(next_message, hooks):  # what an abandoned iteration left
                pass
        yield from self._one_epoch(next_message, hooks)

    def _one_epoch(
        self,
        next_message: Callable[[list[int] | None], tuple[int, Any]],
        hooks: tuple[Callable[[int], None] | None, Callable[[], None] | None],
    ) -> Iterator[Any]:
        kind, tagging = self.kind, self._track.tags
        self._produced = 0
        if kind is MergeKind.EXACT:
            self._open = True
        while kind is not MergeKind.FREE or self._size is None or self._produced < self._size:
            index, msg = next_message(self._wanted(kind))
            got = self._take(kind, index, msg, hooks)
            if got is None:
                return
            if got is _SKIP:
                continue
            self._produced += 1
            if tagging:
                self.tag, got = got
            yield got

    def _wanted(self, kind: MergeKind) -> list[int] | None:
        if kind is MergeKind.ROUND_ROBIN:
            return [self._turns.current()]
        if kind is MergeKind.EXACT:
            return self._epochs.active
        return None

    def _take(
        self,
        kind: MergeKind,
        index: int,
        msg: Any,
        hooks: tuple[Callable[[int], None] | None, Callable[[], None] | None],
    ) -> Any:
        """The datapoint in ``msg``; ``_SKIP`` for another message; None when the epoch ends."""
        if not isinstance(msg, control.Message):
            if kind is MergeKind.ROUND_ROBIN:
                self._turns.took()
            return msg
        if type(msg) is not EpochEnd:
            return _SKIP
        if kind is MergeKind.ROUND_ROBIN:
            return None if self._turns.ended() else _SKIP
        on_pass_end, on_epoch_end = hooks
        if kind is MergeKind.EXACT and self._epochs.end(index):
            self._open = False
            if on_epoch_end is not None:
                on_epoch_end()
            return None
        if kind is MergeKind.FREE and on_pass_end is not None:
            on_pass_end(index)
        return _SKIP
