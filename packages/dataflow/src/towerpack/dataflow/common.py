"""Transforms that reshape the stream of datapoints: repeat, cut, shuffle, cache, concatenate, join.

:func:`repeat_forever` is the one place where a dataflow is iterated again and again: runners,
servers, benchmarks and ``RepeatedData(df, -1)`` all use it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

from .base import DataFlow, LengthUnknownError, ProxyDataFlow, RNGDataFlow, dataflow_len
from .control import EpochEnd

__all__ = [
    "CacheData",
    "ConcatData",
    "EpochEnd",
    "FixedSizeData",
    "JoinData",
    "LocallyShuffleData",
    "RepeatedData",
    "RepeatedDataPoint",
    "repeat_forever",
]


def repeat_forever(ds: DataFlow, mark_epochs: bool = False, allow_empty: bool = False) -> Iterator[Any]:
    """Iterate ``ds`` again and again; an empty pass raises instead of spinning (unless ``allow_empty``).

    With ``mark_epochs`` an :class:`EpochEnd` follows every pass.
    """
    for epoch in itertools.count(1):
        empty = True
        for dp in ds:
            empty = False
            yield dp
        if empty and not allow_empty:
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


class LocallyShuffleData(ProxyDataFlow, RNGDataFlow):
    """Shuffle within a sliding buffer of ``buffer_size`` datapoints; each input datapoint is yielded once.

    Useful when the input can only be read sequentially (a file, a database): the order is
    randomised locally while memory stays bounded.
    """

    def __init__(self, ds: DataFlow, buffer_size: int) -> None:
        ProxyDataFlow.__init__(self, ds)
        if buffer_size <= 0:
            raise ValueError(f"LocallyShuffleData: buffer_size must be positive, got {buffer_size}")
        self.buffer_size = int(buffer_size)

    def reset_state(self) -> None:
        ProxyDataFlow.reset_state(self)
        RNGDataFlow.reset_state(self)

    def __iter__(self) -> Iterator[Any]:
        if not hasattr(self, "rng"):
            raise RuntimeError("LocallyShuffleData: call reset_state() before iterating")
        buf: list[Any] = []
        for dp in self.ds:
            if len(buf) < self.buffer_size:
                buf.append(dp)
                continue
            i = self.rng.randint(len(buf))
            yield buf[i]
            buf[i] = dp
        self.rng.shuffle(buf)
        yield from buf


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
