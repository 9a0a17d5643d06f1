"""Inferencers: what an InferenceRunner computes over a validation set."""

from __future__ import annotations

import numpy as np

from ..callback import Callback

__all__ = ["BinaryClassificationStats", "ClassificationError", "Inferencer", "ScalarStats"]


class Inferencer(Callback):
    """Base class of what an :class:`InferenceRunner` evaluates.

    For each inference pass the runner calls ``before_inference()``, then for every batch
    ``get_fetches()`` (names of tensors in the inference tower) and ``on_fetches(values)``, and
    finally ``after_inference()``, whose ``{name: scalar}`` dict goes to the monitors.
    """

    def before_inference(self) -> None:
        self._before_inference()

    def after_inference(self) -> dict:
        ret = self._after_inference() or {}
        for name, value in ret.items():
            if np.size(value) != 1:
                raise TypeError(f"{self}: after_inference() returned a non-scalar for '{name}': {value!r}")
        return {name: float(value) for name, value in ret.items()}

    def get_fetches(self) -> list[str]:
        """Names of the tensors to fetch for every batch (resolved inside the inference tower)."""
        ret = self._get_fetches()
        if isinstance(ret, str):
            ret = [ret]
        return [r.name if hasattr(r, "name") else r for r in ret]

    def on_fetches(self, results: list) -> None:
        self._on_fetches(results)

    def _before_inference(self) -> None:
        pass

    def _get_fetches(self) -> list[str]:
        raise NotImplementedError

    def _on_fetches(self, results: list) -> None:
        raise NotImplementedError

    def _after_inference(self) -> dict | None:
        return None


class ScalarStats(Inferencer):
    """Average scalar tensors over the whole validation set; reported as ``<prefix>_<name>``."""

    def __init__(self, names, prefix: str = "validation"):
        self.names = [names] if isinstance(names, str) else list(names)
        self.prefix = prefix

    def _before_inference(self) -> None:
        self._sums = [0.0] * len(self.names)
        self._count = 0

    def _get_fetches(self):
        return self.names

    def _on_fetches(self, results) -> None:
        for i, (name, v) in enumerate(zip(self.names, results, strict=True)):
            v = np.asarray(v)
            if v.size != 1:
                raise ValueError(f"ScalarStats: '{name}' is not a scalar (shape {list(v.shape)})")
            self._sums[i] += float(v)
        self._count += 1

    def _after_inference(self) -> dict:
        if self._count == 0:
            return {}
        out = {}
        for name, total in zip(self.names, self._sums, strict=True):
            key = f"{self.prefix}_{name}" if self.prefix else name
            out[key] = total / self._count
        return out


class ClassificationError(Inferencer):
    """The error rate over the validation set from a per-example "wrong" vector (1 = wrong).

    ``wrong_tensor_name`` names a vector with one entry per example, e.g. built with
    ``tf.cast(tf.logical_not(tf.nn.in_top_k(logits, label, 1)), tf.float32, name='incorrect_vector')``.
    Every example counts the same, so batches of different sizes are averaged correctly.
    """

    def __init__(self, wrong_tensor_name: str = "incorrect_vector", summary_name: str = "validation_error"):
        self.wrong_tensor_name = wrong_tensor_name
        self.summary_name = summary_name

    def _before_inference(self) -> None:
        self._wrong = 0.0
        self._total = 0

    def _get_fetches(self):
        return [self.wrong_tensor_name]

    def _on_fetches(self, results) -> None:
        vec = np.asarray(results[0])
        if vec.ndim != 1:
            name = self.wrong_tensor_name
            raise ValueError(f"ClassificationError: '{name}' must be a vector, not shape {list(vec.shape)}")
        self._wrong += float(vec.sum())
        self._total += vec.shape[0]

    def _after_inference(self) -> dict:
        if self._total == 0:
            return {}
        return {self.summary_name: self._wrong / self._total}


class BinaryClassificationStats(Inferencer):
    """Precision and recall of a binary classifier over the validation set.

    ``pred_tensor_name`` and ``label_tensor_name`` name tensors of the same shape holding 0/1
    predictions and labels. Reported as ``<prefix>_precision`` (correct positives / predicted
    positives) and ``<prefix>_recall`` (correct positives / actual positives), each 0 when
    nothing is in its denominator.
    """

    def __init__(self, pred_tensor_name: str, label_tensor_name: str, prefix: str = "val"):
        self.pred_tensor_name = pred_tensor_name
        self.label_tensor_name = label_tensor_name
        self.prefix = prefix

    def _before_inference(self) -> None:
        self._correct_pos = self._pred_pos = self._label_pos = 0

    def _get_fetches(self):
        return [self.pred_tensor_name, self.label_tensor_name]

    def _on_fetches(self, results) -> None:
        pred, label = (np.asarray(r) for r in results)
        if pred.shape != label.shape:
            raise ValueError(
                f"BinaryClassificationStats: predictions {list(pred.shape)} and labels "
                f"{list(label.shape)} differ in shape"
            )
        self._pred_pos += int((pred == 1).sum())
        self._label_pos += int((label == 1).sum())
        self._correct_pos += int(((pred == 1) & (label == 1)).sum())

    def _after_inference(self) -> dict:
        precision = self._correct_pos / self._pred_pos if self._pred_pos else 0.0
        recall = self._correct_pos / self._label_pos if self._label_pos else 0.0
        return {f"{self.prefix}_precision": precision, f"{self.prefix}_recall": recall}
