"""Dataflows that produce datapoints: from a list, a generator, an iterable, a queue, or fake arrays."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .base import DataFlow, LengthUnknownError, RNGDataFlow

__all__ = ["DataFromGenerator", "DataFromIterable", "DataFromList", "DataFromQueue", "FakeData"]

#: What a job that resumes exactly reads instead of a source without positions.
RESUMABLE_SOURCES = "IndexedList(lst, shuffle=...) (towerpack.dataflow), an ArrayDataset or a dataset reader"


class DataFromList(RNGDataFlow):
    """Yield the items of a list, shuffled each epoch when ``shuffle`` is true."""

    resume_refusal = (
        "its items have no position in an epoch order. Use IndexedList(lst, shuffle=...) "
        "(towerpack.dataflow): the same items, each epoch's order drawn from (seed, epoch), sharded "
        "among ranks and workers"
    )

    def __init__(self, lst: Sequence[Any], shuffle: bool = True) -> None:
        self.lst = lst
        self.shuffle = shuffle

    def __len__(self) -> int:
        return len(self.lst)

    def __iter__(self) -> Iterator[Any]:
        if not self.shuffle:
            yield from self.lst
            return
        if not hasattr(self, "rng"):
            raise RuntimeError("DataFromList(shuffle=True): call reset_state() before iterating")
        for i in self.rng.permutation(len(self.lst)):
            yield self.lst[i]


class DataFromGenerator(DataFlow):
    """Yield from a generator function (called once per epoch) or a generator object (one epoch only)."""

    resume_refusal = f"a generator's items have no position in an epoch order. Read from {RESUMABLE_SOURCES}"

    def __init__(self, gen: Callable[[], Iterable[Any]] | Iterable[Any], size: int | None = None) -> None:
        self._gen = gen
        self._size = size
        self._used = False

    def __len__(self) -> int:
        if self._size is None:
            raise LengthUnknownError("DataFromGenerator has no size; pass size=")
        return self._size

    def __iter__(self) -> Iterator[Any]:
        if callable(self._gen):
            yield from self._gen()
            return
        if self._used:
            raise RuntimeError(
                "DataFromGenerator over a generator object can be iterated only once; "
                "pass a generator function to iterate several epochs"
            )
        self._used = True
        yield from self._gen


class DataFromIterable(DataFlow):
    """Yield the items of an iterable, iterating it again each epoch.

    The length is the iterable's when it has one. A one-shot iterator (a generator object) is
    empty after its first epoch; an epoch without datapoints after a full one raises instead of
    silently ending training.
    """

    resume_refusal = f"an iterable's items have no position in an epoch order. Read from {RESUMABLE_SOURCES}"

    def __init__(self, iterable: Iterable[Any]) -> None:
        self._itr = iterable
        self._yielded_before = False

    def __len__(self) -> int:
        try:
            return len(self._itr)  # type: ignore[arg-type]
        except TypeError:
            raise LengthUnknownError(f"DataFromIterable: {type(self._itr).__name__} has no length") from None

    def __iter__(self) -> Iterator[Any]:
        empty = True
        for x in self._itr:
            empty = False
            yield x
        if empty and self._yielded_before:
            raise RuntimeError(
                f"DataFromIterable: {type(self._itr).__name__} yielded nothing this epoch after a full "
                "one: it is a one-shot iterator; pass a list or a re-iterable object"
            )
        self._yielded_before = self._yielded_before or not empty


class DataFromQueue(DataFlow):
    """Yield ``queue.get()`` forever (a ``queue.Queue`` or ``multiprocessing.Queue``); no length."""

    resume_refusal = f"a queue's items have no position in an epoch order. Read from {RESUMABLE_SOURCES}"

    def __init__(self, queue: Any) -> None:
        self.queue = queue

    def __iter__(self) -> Iterator[Any]:
        while True:
            yield self.queue.get()


class FakeData(RNGDataFlow):
    """Datapoints of arrays with the given shapes, for tests and benchmarks.

    Args:
        shapes: one shape per component.
        size: datapoints per epoch.
        random: draw new values for every datapoint; when false, the same arrays are yielded
            every time (cheapest, for measuring transport).
        dtype: one dtype for all components, or a list of one per component.
        domain: the values' range ``(low, high)``: one pair for all components, or a list of one
            pair per component. Values lie in ``[low, high)`` (booleans ignore it).
    """

    resume_refusal = (
        "it draws new values for every datapoint, so there are no items to resume. Wrap fixed arrays in "
        f"{RESUMABLE_SOURCES}, or train without exact_resume"
    )

    def __init__(
        self,
        shapes: Sequence[Sequence[int]],
        size: int = 1000,
        random: bool = True,
        dtype: Any = "float32",
        domain: Sequence[float] | Sequence[Sequence[float]] = (0, 1),
    ) -> None:
        self.shapes = [tuple(int(d) for d in s) for s in shapes]
        self._size = int(size)
        self.random = random
        dtypes = dtype if isinstance(dtype, (list, tuple)) else [dtype] * len(self.shapes)
        if len(dtypes) != len(self.shapes):
            raise ValueError(f"FakeData: {len(dtypes)} dtypes given for {len(self.shapes)} shapes")
        self.dtypes = [np.dtype(d) for d in dtypes]
        self.domain = _domains(domain, len(self.shapes))
        self._fixed: list[np.ndarray] | None = None

    def __len__(self) -> int:
        return self._size

    def _make(self) -> list[np.ndarray]:
        out = []
        for shape, dt, (low, high) in zip(self.shapes, self.dtypes, self.domain, strict=True):
            if dt.kind in "iu":
                out.append(self.rng.randint(int(low), max(int(high), int(low) + 1), size=shape).astype(dt))
            elif dt.kind == "b":
                out.append(self.rng.rand(*shape) > 0.5)
            else:
                out.append((self.rng.rand(*shape) * (high - low) + low).astype(dt))
        return out

    def __iter__(self) -> Iterator[list[np.ndarray]]:
        if not hasattr(self, "rng"):
            self.reset_state()
        if not self.random and self._fixed is None:
            self._fixed = self._make()
        for _ in range(self._size):
            yield list(self._fixed) if self._fixed is not None else self._make()


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.number)) and not isinstance(x, bool)


def _domains(domain: Any, count: int) -> list[tuple[Any, Any]]:
    """One ``(low, high)`` per component from FakeData's ``domain``: a pair for all, or a list of pairs."""
    if not isinstance(domain, (list, tuple)):
        raise TypeError(f"FakeData: domain must be a (low, high) pair or a list of them, got {domain!r}")
    if len(domain) == 2 and all(_is_number(x) for x in domain):
        pairs = [tuple(domain)] * count
    elif all(isinstance(p, (list, tuple)) and len(p) == 2 and all(_is_number(x) for x in p) for p in domain):
        pairs = [tuple(p) for p in domain]
        if len(pairs) != count:
            raise ValueError(f"FakeData: {len(pairs)} domains given for {count} shapes")
    else:
        raise TypeError(f"FakeData: domain must be a (low, high) pair or a list of them, got {domain!r}")
    for k, (low, high) in enumerate(pairs):
        if not low <= high:
            raise ValueError(f"FakeData: domain {k} has low {low} > high {high}")
    return pairs
