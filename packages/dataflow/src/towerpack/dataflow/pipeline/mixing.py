"""RandomChooseData and RandomMixData: draw from several dataflows at random."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .base import DataFlow, LengthUnknownError, RNGDataFlow

__all__ = ["RandomChooseData", "RandomMixData"]


class RandomChooseData(RNGDataFlow):
    """Each step, yield the next datapoint of a randomly chosen dataflow; stop when a chosen one ends.

    ``df_lists`` holds dataflows (chosen with equal probability) or ``(dataflow, probability)``
    pairs whose probabilities sum to 1. There is no length.
    """

    def __init__(self, df_lists: Sequence[DataFlow | tuple[DataFlow, float]]) -> None:
        if not df_lists:
            raise ValueError("RandomChooseData needs at least one dataflow")
        if all(isinstance(d, tuple) for d in df_lists):
            probs = [float(p) for _, p in df_lists]
            if not math.isclose(sum(probs), 1.0, rel_tol=0, abs_tol=1e-6):
                raise ValueError(f"RandomChooseData: the probabilities sum to {sum(probs)}, not 1")
            self.df_lists = list(df_lists)
        elif any(isinstance(d, tuple) for d in df_lists):
            raise ValueError("RandomChooseData: give every dataflow a probability, or none")
        else:
            self.df_lists = [(d, 1.0 / len(df_lists)) for d in df_lists]

    def reset_state(self) -> None:
        super().reset_state()
        for d, _ in self.df_lists:
            d.reset_state()

    def __len__(self) -> int:
        raise LengthUnknownError("RandomChooseData has no length: it stops when a chosen dataflow ends")

    def __iter__(self) -> Iterator[Any]:
        if not hasattr(self, "rng"):
            raise RuntimeError("RandomChooseData: call reset_state() before iterating")
        its = [iter(d) for d, _ in self.df_lists]
        probs = np.array([p for _, p in self.df_lists])
        probs = probs / probs.sum()
        while True:
            k = self.rng.choice(len(its), p=probs)
            try:
                yield next(its[k])
            except StopIteration:
                return


class RandomMixData(RNGDataFlow):
    """Each epoch, all datapoints of all dataflows in a random interleaving that keeps each one's order.

    Every dataflow needs a length; the length is their sum.
    """

    def __init__(self, df_lists: Sequence[DataFlow]) -> None:
        if not df_lists:
            raise ValueError("RandomMixData needs at least one dataflow")
        self.df_lists = list(df_lists)

    def reset_state(self) -> None:
        super().reset_state()
        for d in self.df_lists:
            d.reset_state()

    def __len__(self) -> int:
        return sum(len(d) for d in self.df_lists)

    def __iter__(self) -> Iterator[Any]:
        if not hasattr(self, "rng"):
            raise RuntimeError("RandomMixData: call reset_state() before iterating")
        sizes = [len(d) for d in self.df_lists]
        order = np.repeat(np.arange(len(sizes)), sizes)
        self.rng.shuffle(order)
        its = [iter(d) for d in self.df_lists]
        for k in order:
            try:
                yield next(its[k])
            except StopIteration:
                raise RuntimeError(
                    f"RandomMixData: dataflow {k} ended before its length {sizes[k]}"
                ) from None
