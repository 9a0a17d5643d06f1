"""Running statistics: ``StatCounter``, ``RatioCounter`` (and ``Accuracy``), ``BinaryStatistics``,
``OnlineMoments``. Plain numpy, no TensorFlow.

Reading a statistic of nothing (the average of no samples) is a ``ValueError`` naming it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Accuracy", "BinaryStatistics", "OnlineMoments", "RatioCounter", "StatCounter"]


class StatCounter:
    """Collects values; ``average``, ``sum``, ``max`` and ``min`` are over every element fed
    (arrays included: an array contributes all its elements)."""

    def __init__(self) -> None:
        self._values: list[Any] = []

    def feed(self, v: Any) -> None:
        self._values.append(v)

    def reset(self) -> None:
        self._values = []

    @property
    def count(self) -> int:
        return len(self._values)

    def samples(self) -> list[Any]:
        """The values fed so far (the list itself)."""
        return self._values

    def _all(self, what: str) -> np.ndarray:
        if not self._values:
            raise ValueError(f"StatCounter.{what}: no value was fed")
        if all(np.ndim(v) == 0 for v in self._values):
            return np.asarray(self._values)
        return np.concatenate([np.ravel(v) for v in self._values])

    @property
    def average(self) -> float:
        return np.mean(self._all("average"))

    @property
    def sum(self) -> float:
        return np.sum(self._all("sum"))

    @property
    def max(self) -> float:
        return np.max(self._all("max"))

    @property
    def min(self) -> float:
        return np.min(self._all("min"))


class RatioCounter:
    """``count / total`` over everything fed: ``feed(count, total=1)``; the ratio of nothing is 0."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._count = 0
        self._total = 0

    def feed(self, count: float, total: float = 1) -> None:
        self._count += count
        self._total += total

    @property
    def ratio(self) -> float:
        return 0 if self._total == 0 else self._count / self._total

    @property
    def total(self) -> float:
        return self._total

    @property
    def count(self) -> float:
        return self._count


class Accuracy(RatioCounter):
    """A ``RatioCounter`` of correct predictions; ``accuracy`` is its ratio."""

    @property
    def accuracy(self) -> float:
        return self.ratio


class BinaryStatistics:
    """Counts of a binary classifier's predictions against labels (arrays of 0 and 1).

    ``precision`` and ``recall`` are the usual ones (0 when nothing was predicted or labelled
    positive). As in the reference, ``false_positive`` is ``1 - precision`` (the share of positive
    predictions that are wrong) and ``false_negative`` is ``1 - recall``; both are 0 when their
    denominator is.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.nr_pos = 0  # labels that are 1
        self.nr_neg = 0  # labels that are 0
        self.nr_pred_pos = 0
        self.nr_pred_neg = 0
        self.corr_pos = 0  # true positives
        self.corr_neg = 0  # true negatives

    def feed(self, pred: Any, label: Any) -> None:
        pred, label = np.asarray(pred), np.asarray(label)
        if pred.shape != label.shape:
            raise ValueError(f"BinaryStatistics.feed: pred has shape {pred.shape}, label {label.shape}")
        self.nr_pos += int((label == 1).sum())
        self.nr_neg += int((label == 0).sum())
        self.nr_pred_pos += int((pred == 1).sum())
        self.nr_pred_neg += int((pred == 0).sum())
        self.corr_pos += int(((pred == 1) & (pred == label)).sum())
        self.corr_neg += int(((pred == 0) & (pred == label)).sum())

    @property
    def precision(self) -> float:
        return 0 if self.nr_pred_pos == 0 else self.corr_pos / self.nr_pred_pos

    @property
    def recall(self) -> float:
        return 0 if self.nr_pos == 0 else self.corr_pos / self.nr_pos

    @property
    def false_positive(self) -> float:
        return 0 if self.nr_pred_pos == 0 else 1 - self.precision

    @property
    def false_negative(self) -> float:
        return 0 if self.nr_pos == 0 else 1 - self.recall


class OnlineMoments:
    """Mean and sample variance of a stream of scalars or same-shaped arrays (Welford's method),
    without keeping the values. The variance of fewer than two values is NaN."""

    def __init__(self) -> None:
        self._mean: Any = 0.0
        self._m2: Any = 0.0
        self._n = 0

    def feed(self, x: Any) -> None:
        x = np.asarray(x, dtype=np.float64)
        self._n += 1
        delta = x - self._mean
        self._mean = self._mean + delta / self._n
        self._m2 = self._m2 + delta * (x - self._mean)

    @property
    def count(self) -> int:
        return self._n

    @property
    def mean(self) -> Any:
        if self._n == 0:
            raise ValueError("OnlineMoments.mean: no value was fed")
        return self._mean

    @property
    def variance(self) -> Any:
        if self._n == 0:
            raise ValueError("OnlineMoments.variance: no value was fed")
        if self._n == 1:
            return self._m2 * np.nan
        return self._m2 / (self._n - 1)

    @property
    def std(self) -> Any:
        return np.sqrt(self.variance)
