"""Transforms that reshape the stream of datapoints: repeat, cut, shuffle, cache, concatenate, join.

:func:`repeat_forever` is the one place where a dataflow is iterated again and again: runners,
servers, benchmarks and ``RepeatedData(df, -1)`` all use it.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..resume.protocol import Step
from ..wire.control import EpochEnd
from .base import DataFlow, LengthUnknownError, ProxyDataFlow, RNGDataFlow, dataflow_len
from .sharding import dataflow_tree

__all__ = [
    "CacheData",
    "ConcatData",
    "EpochEnd",
    "FixedSizeData",
    "JoinData",
    "LocallyShuffleData",
    "RepeatedData",
    "RepeatedDataPoint",
    "mixes_passes",
    "repeat_forever",
]


def repeat_forever(ds: DataFlow, mark_epochs: bool = False, allow_empty: bool | int = False) -> Iterator[Any]:
    """Iterate ``ds`` again and again; an empty pass raises instead of spinning (unless ``allow_empty``:
    True, or the number of empty passes in a row that may come, as at a resume that finds some epochs
    it continues done).

    A pass that yields nothing but leaves more datapoints held over for later passes (by a stage
    such as ``BatchDataByShape`` whose groups fill up across passes) is progress, not an empty pass.
    With ``mark_epochs`` an :class:`EpochEnd` follows every pass.
    """
    in_a_row = 0
    for epoch in itertools.count(1):
        empty, held = True, _held_over(ds)
        for dp in ds:
            empty = False
            yield dp
        in_a_row = in_a_row + 1 if empty and _held_over(ds) <= held else 0
        if in_a_row and (allow_empty is False or (allow_empty is not True and in_a_row > allow_empty)):
            raise RuntimeError(f"the dataflow {type(ds).__name__} produced no datapoints in an epoch")
        if mark_epochs:
            yield EpochEnd(epoch)


class RepeatedData(ProxyDataFlow):
    """Repeat the input ``num`` times per epoch; ``num=-1`` repeats forever (and has no length)."""

    def __init__(self, ds: DataFlow, num: int) -> None:
        super().__init__(ds)
        if num < -1 or num == 0:
            raise ValueError(f"RepeatedData: num must be positive or -1, got {num}")
        self.num = num

    def __len__(self) -> int:
        if self.num == -1:
            raise LengthUnknownError("RepeatedData(num=-1) is infinite")
        return len(self.ds) * self.num

    def __iter__(self) -> Iterator[Any]:
        if self.num == -1:
            yield from repeat_forever(self.ds)
            return
        for _ in range(self.num):
            yield from self.ds


class RepeatedDataPoint(ProxyDataFlow):
    """Yield every datapoint ``num`` times in a row."""

    def __init__(self, ds: DataFlow, num: int) -> None:
        super().__init__(ds)
        if int(num) < 1:
            raise ValueError(f"RepeatedDataPoint: num must be >= 1, got {num}")
        self.num = int(num)

    def __len__(self) -> int:
        return len(self.ds) * self.num

    def __iter__(self) -> Iterator[Any]:
        for dp in self.ds:
            for _ in range(self.num):
                yield dp


class CacheData(ProxyDataFlow, RNGDataFlow):
    """Stream the first epoch and keep it in memory; later epochs replay it (shuffled with ``shuffle``).

    :meth:`reset_state` empties the cache. An epoch left unfinished leaves the cache partial, and
    the next epoch streams the input again from its start.
    """

    def __init__(self, ds: DataFlow, shuffle: bool = False) -> None:
        ProxyDataFlow.__init__(self, ds)
        self.shuffle = shuffle
        self._cache: list[Any] | None = None

    def reset_state(self) -> None:
        ProxyDataFlow.reset_state(self)
        RNGDataFlow.reset_state(self)
        self._cache = None

    def __len__(self) -> int:
        return len(self._cache) if self._cache is not None else len(self.ds)

    def __iter__(self) -> Iterator[Any]:
        if self._cache is None:
            buf = []
            for dp in self.ds:
                buf.append(dp)
                yield dp
            self._cache = buf
            return
        if not self.shuffle:
            yield from self._cache
            return
        if not hasattr(self, "rng"):
            raise RuntimeError("CacheData(shuffle=True): call reset_state() before iterating")
        for i in self.rng.permutation(len(self._cache)):
            yield self._cache[i]


class FixedSizeData(ProxyDataFlow):
    """Yield exactly ``size`` datapoints per epoch, restarting the input when it ends.

    With ``keep_state`` the input's iterator carries over between epochs, so consecutive epochs
    continue where the previous one stopped instead of starting the input again.
    """

    def __init__(self, ds: DataFlow, size: int, keep_state: bool = True) -> None:
        super().__init__(ds)
        self._size = int(size)
        self.keep_state = keep_state
        self._itr: Iterator[Any] | None = None

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        if self._itr is None or not self.keep_state:
            self._itr = iter(self.ds)
        count = 0
        restarted = False
        while count < self._size:
            try:
                dp = next(self._itr)
            except StopIteration:
                if restarted:
                    raise RuntimeError("FixedSizeData: the input dataflow produced no datapoints") from None
                self._itr = iter(self.ds)
                restarted = True
                continue
            restarted = False
            count += 1
            yield dp


@dataclass
class _ShuffleBuffer:
    """LocallyShuffleData's buffer: a FIFO queue that is shuffled now and then."""

    items: deque[Any] = field(default_factory=deque)
    #: Input datapoints taken since the last shuffle.
    taken: int = 0

    def shuffle(self, rng: np.random.RandomState) -> None:
        items = list(self.items)  # shuffling the deque itself would index it O(n) per swap
        rng.shuffle(items)
        self.items.clear()
        self.items.extend(items)
        self.taken = 0


class LocallyShuffleData(ProxyDataFlow, RNGDataFlow):
    """Shuffle locally through a buffer of ``buffer_size`` datapoints, for inputs read sequentially.

    Each datapoint of ``ds`` enters the back of the buffer ``num_reuse`` times; once the buffer
    is full, every entry pushes the one at the front out to the consumer. The buffer is shuffled
    after every ``shuffle_interval`` datapoints taken from ``ds`` (default ``buffer_size // 3``).
    Memory stays bounded (a file or a database read in order) while the order is randomised
    locally. ``len`` is ``len(ds) * num_reuse``.

    ``exact_epochs`` says where the iteration ends:

    - ``False`` (the default, the reference's behaviour): never. Pass after pass of ``ds`` flows
      through the buffer, so the datapoints of one pass mix with those of the next, and the buffer
      carries over from one ``iter()`` to the next. Consumers that count (runners, the trainer's
      steps per epoch) take ``len`` datapoints as an epoch; runners give up exact epochs for it.
    - ``True``: an epoch is one pass of ``ds``; at its end the rest of the buffer is shuffled and
      yielded, so every datapoint of the pass appears exactly ``num_reuse`` times per epoch.
    """

    #: Whether iterating never ends, running the input's passes together (runners check it).
    endless: bool

    def __init__(
        self,
        ds: DataFlow,
        buffer_size: int,
        num_reuse: int = 1,
        shuffle_interval: int | None = None,
        exact_epochs: bool = False,
    ) -> None:
        ProxyDataFlow.__init__(self, ds)
        self.buffer_size = _positive(buffer_size, "buffer_size")
        self.num_reuse = _positive(num_reuse, "num_reuse")
        default_interval = max(1, self.buffer_size // 3)
        self.shuffle_interval = (
            default_interval if shuffle_interval is None else _positive(shuffle_interval, "shuffle_interval")
        )
        self.exact_epochs = bool(exact_epochs)
        self.endless = not self.exact_epochs
        self._buffer = _ShuffleBuffer()
        self._source: Iterator[Any] | None = None  # the endless input stream, once iterated

    def resume_step(self) -> Step:
        name = type(self).__name__
        uncounted = name if self.endless or self.num_reuse != 1 else None
        return Step(inputs=(self.ds,), unordered=name, uncounted=uncounted, repeats=self.endless)

    def reset_state(self) -> None:
        ProxyDataFlow.reset_state(self)
        RNGDataFlow.reset_state(self)
        self._buffer = _ShuffleBuffer()
        self._source = None

    def __len__(self) -> int:
        return len(self.ds) * self.num_reuse

    def __iter__(self) -> Iterator[Any]:
        if not hasattr(self, "rng"):
            raise RuntimeError("LocallyShuffleData: call reset_state() before iterating")
        out = self._untag if self._track.tags else iter
        if self.exact_epochs:
            buffer = _ShuffleBuffer()
            yield from out(self._through(self._with_tags(iter(self.ds)), buffer))
            buffer.shuffle(self.rng)
            yield from out(buffer.items)
            return
        if self._source is None:
            self._source = self._with_tags(repeat_forever(self.ds, allow_empty=self._track.empty_passes))
        try:
            yield from out(self._through(self._source, self._buffer))
        except Exception:
            self._source = None  # a failed input stream is finished: start it again next time
            raise

    # Tag mode (see towerpack.dataflow.resume.tags): the buffer holds (datapoint, tag) pairs. The
    # items in it at a stop were not trained on, so a resumed source reads them again.

    def _with_tags(self, stream: Iterator[Any]) -> Iterator[Any]:
        if not self._track.tags:
            return stream
        ds = self.ds
        return ((dp, ds.position_tag) for dp in stream)

    def _untag(self, entries: Iterable[Any]) -> Iterator[Any]:
        for dp, tag in entries:
            self.position_tag = tag
            yield dp

    def _through(self, source: Iterator[Any], buffer: _ShuffleBuffer) -> Iterator[Any]:
        """Feed ``source`` into ``buffer``, yielding what overflows it."""
        items = buffer.items
        for dp in source:
            buffer.taken += 1
            if buffer.taken >= self.shuffle_interval:
                buffer.shuffle(self.rng)
            items.extend([dp] * self.num_reuse)
            # All copies go in before any yield: an iteration abandoned at a yield loses nothing.
            while len(items) > self.buffer_size:
                yield items.popleft()


def _positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"LocallyShuffleData: {name} must be a positive integer, got {value!r}")
    return int(value)


def _held_over(ds: DataFlow) -> int:
    """Datapoints that stages of ``ds`` hold over from one pass to the next (their ``held_over``)."""
    return sum(getattr(d, "held_over", 0) for d in dataflow_tree(ds))


def mixes_passes(ds: DataFlow) -> bool:
    """Whether ``ds`` or a dataflow it reads from runs its input's passes together: an endless stage,
    or one that holds datapoints over to later passes (it has ``held_over``, as ``BatchDataByShape``).

    Such a pipeline has no exact epochs: a runner over it counts ``len`` datapoints per epoch.
    """
    return any(getattr(d, "endless", False) or hasattr(d, "held_over") for d in dataflow_tree(ds))


class ConcatData(DataFlow):
    """Yield all datapoints of the first dataflow, then of the second, and so on."""

    def __init__(self, df_lists: Sequence[DataFlow]) -> None:
        self.df_lists = list(df_lists)

    def reset_state(self) -> None:
        for d in self.df_lists:
            d.reset_state()

    def __len__(self) -> int:
        return sum(len(d) for d in self.df_lists)

    def __iter__(self) -> Iterator[Any]:
        for d in self.df_lists:
            yield from d


class JoinData(DataFlow):
    """Join several dataflows component-wise: list datapoints are concatenated, dict datapoints merged.

    All inputs must have the same length (checked when the lengths are known); iteration stops
    with an error if one input ends before the others.
    """

    def __init__(self, df_lists: Sequence[DataFlow]) -> None:
        self.df_lists = list(df_lists)
        if not self.df_lists:
            raise ValueError("JoinData needs at least one dataflow")
        lengths = [dataflow_len(d) for d in self.df_lists]
        if None not in lengths and len(set(lengths)) > 1:
            raise ValueError(f"JoinData: the dataflows have different lengths {lengths}")

    def reset_state(self) -> None:
        for d in self.df_lists:
            d.reset_state()

    def __len__(self) -> int:
        return min(len(d) for d in self.df_lists)

    def __iter__(self) -> Iterator[Any]:
        its = [iter(d) for d in self.df_lists]
        while True:
            dps = []
            for k, it in enumerate(its):
                try:
                    dps.append(next(it))
                except StopIteration:
                    if k == 0 and self._all_done(its[1:]):
                        return
                    raise RuntimeError(f"JoinData: dataflow {k} ended before the others") from None
            if isinstance(dps[0], dict):
                merged: dict = {}
                for dp in dps:
                    merged.update(dp)
                yield merged
            else:
                yield [c for dp in dps for c in dp]

    @staticmethod
    def _all_done(its: list[Iterator[Any]]) -> bool:
        for it in its:
            try:
                next(it)
            except StopIteration:
                continue
            return False
        return True
