"""The DataFlow protocol: an iterable of datapoints with an optional length and a per-process reset."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..resume.protocol import Resumable

__all__ = [
    "DataFlow",
    "DataFlowReentrantGuard",
    "DataFlowTerminated",
    "LengthUnknownError",
    "ProxyDataFlow",
    "RNGDataFlow",
    "dataflow_len",
]


class LengthUnknownError(NotImplementedError, TypeError):
    """Raised by ``len(df)`` when the length is not known.

    A ``NotImplementedError`` as in the reference API; also a ``TypeError`` so that ``list(df)``
    and other callers of ``len()`` as a size hint treat it as "no length" instead of failing.
    """


def dataflow_len(df: object) -> int | None:
    """The length of ``df``, or None when it has none.

    ``len()`` of a dataflow without a size raises ``NotImplementedError`` (the reference API) or
    ``TypeError`` (an iterable without ``__len__``); any other error is a real failure and propagates.
    """
    try:
        return len(df)  # type: ignore[arg-type]
    except (NotImplementedError, TypeError):
        return None


class DataFlowTerminated(RuntimeError):
    """Raised when a dataflow can no longer produce data because its resources were released."""


class DataFlowReentrantGuard:
    """Context manager that raises instead of letting two threads iterate one dataflow at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        if not self._lock.acquire(blocking=False):
            raise RuntimeError("this dataflow is already being iterated; it is not reentrant or thread-safe")

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class DataFlow(Resumable):
    """Base class of all dataflows.

    A datapoint is a list (or tuple or dict) of components, usually numpy arrays. Call
    :meth:`reset_state` once in the process that iterates, before the first iteration; each
    ``iter(df)`` is one epoch.

    A subclass written against the reference's older API (``get_data()`` and ``size()`` in place of
    ``__iter__`` and ``__len__``) works as it is: a class that defines ``get_data`` or ``size`` but
    not the newer method gets the newer one from it (a class defining both keeps its own).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = vars(cls)
        if callable(own.get("get_data")) and "__iter__" not in own:
            cls.__iter__ = _iter_by(own["get_data"])  # type: ignore[method-assign]
        if callable(own.get("size")) and "__len__" not in own:
            cls.__len__ = _len_by(own["size"])  # type: ignore[method-assign]

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def __len__(self) -> int:
        """Number of datapoints per epoch; raises ``NotImplementedError`` when it is not known."""
        raise LengthUnknownError(f"the length of {type(self).__name__} is not known")

    def reset_state(self) -> None:
        """Prepare for iteration in the current process (open files, seed RNGs, start workers)."""

    # The reference's older names of iter() and len(), still called by its scripts.
    def get_data(self) -> Iterator[Any]:
        """``iter(self)``."""
        return iter(self)

    def size(self) -> int:
        """``len(self)``."""
        return len(self)


def _iter_by(get_data: Callable[[Any], Iterator[Any]]) -> Callable[[Any], Iterator[Any]]:
    def __iter__(self: Any) -> Iterator[Any]:
        return iter(get_data(self))

    return __iter__


def _len_by(size: Callable[[Any], int]) -> Callable[[Any], int]:
    def __len__(self: Any) -> int:
        try:
            return size(self)
        except LengthUnknownError:
            raise
        except NotImplementedError as e:  # the older API's "no length"; len() callers need a TypeError
            raise LengthUnknownError(str(e) or f"the length of {type(self).__name__} is not known") from e

    return __len__


def _new_seed(obj: object) -> int:
    # pid keeps forked copies apart, time keeps restarts apart, id keeps sibling dataflows apart.
    return (os.getpid() * 1_000_003 + id(obj) + int(time.time() * 1e6)) % (2**32 - 1)


class RNGDataFlow(DataFlow):
    """A dataflow with its own ``numpy.random.RandomState`` in ``self.rng``, re-seeded by ``reset_state``.

    Each process that calls ``reset_state`` draws a different seed, so forked workers do not
    produce identical random streams. Set ``seed`` (an int) before ``reset_state`` for a fixed seed.
    """

    rng: np.random.RandomState
    seed: int | None = None

    def reset_state(self) -> None:
        self.rng = np.random.RandomState(self.seed if self.seed is not None else _new_seed(self))


class ProxyDataFlow(DataFlow):
    """A dataflow that forwards everything to another one; subclass it to change one aspect."""

    def __init__(self, ds: DataFlow) -> None:
        self.ds = ds

    def reset_state(self) -> None:
        self.ds.reset_state()

    def __len__(self) -> int:
        return len(self.ds)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.ds)
