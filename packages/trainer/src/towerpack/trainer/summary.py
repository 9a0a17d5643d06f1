"""Summaries a model adds while building its graph: moving averages of scalars, plain tensor summaries.

Only the main training tower adds summaries; calls from other towers are no-ops, so a tower
function can call these unconditionally.
"""

from __future__ import annotations

import re

from .compat import tf, tfv1
from .tower import MOVING_SUMMARY_OPS, get_current_tower_context

__all__ = ["MOVING_SUMMARY_OPS", "add_moving_summary", "add_tensor_summary"]


def _summaries_allowed() -> bool:
    ctx = get_current_tower_context()
    return ctx is None or ctx.is_main_training_tower


def _clean_name(tensor) -> str:
    return re.sub(r"^tower\d+/", "", tensor.op.name)


def add_moving_summary(*tensors, decay: float = 0.95) -> list:
    """Track an exponential moving average of each scalar tensor and summarize it.

    The averages are updated on every training step by the ``MovingAverageSummary`` callback
    (one of the defaults) and reach the monitors with the epoch's summaries under the tensor's
    name. Returns the average tensors (an empty list outside the main training tower).
    """
    if not _summaries_allowed():
        return []
    graph = tfv1.get_default_graph()
    averages = []
    for t in tensors:
        if not isinstance(t, tf.Tensor):
            raise TypeError(f"add_moving_summary takes tensors, got {t!r}")
        if t.shape.ndims != 0:
            raise ValueError(f"add_moving_summary needs scalar tensors; {t.name} has shape {t.shape}")
        name = _clean_name(t)
        with tfv1.name_scope(f"EMA/{name}/"):
            value = tfv1.get_variable(
                f"EMA/{name}/value", shape=[], initializer=tfv1.zeros_initializer(), trainable=False
            )
            count = tfv1.get_variable(
                f"EMA/{name}/count", shape=[], initializer=tfv1.zeros_initializer(), trainable=False
            )
            x = tf.cast(t, tf.float32)
            update = tf.group(
                tfv1.assign_add(count, 1.0),
                tfv1.assign(value, value * decay + x * (1.0 - decay)),
                name="update",
            )
            graph.add_to_collection(MOVING_SUMMARY_OPS, update)
            # Divide out the bias towards the zero start (as Adam does for its moments).
            average = tf.identity(value / tf.maximum(1.0 - tf.pow(decay, count), 1e-12), name="average")
        with tfv1.name_scope(None):
            tfv1.summary.scalar(name + "-summary", average)
        averages.append(average)
    return averages


def add_tensor_summary(tensor, types=("scalar",), name: str | None = None) -> None:
    """Summarize a tensor: ``scalar``, ``histogram``, ``mean``, ``rms``, ``sparsity`` (main tower only)."""
    if not _summaries_allowed():
        return
    name = name or _clean_name(tensor)
    makers = {
        "scalar": lambda: tfv1.summary.scalar(name + "-summary", tensor),
        "histogram": lambda: tfv1.summary.histogram(name + "-histogram", tensor),
        "mean": lambda: tfv1.summary.scalar(name + "/mean", tf.reduce_mean(tensor)),
        "rms": lambda: tfv1.summary.scalar(name + "/rms", tf.sqrt(tf.reduce_mean(tf.square(tensor)))),
        "sparsity": lambda: tfv1.summary.scalar(name + "/sparsity", tf.math.zero_fraction(tensor)),
    }
    with tfv1.name_scope(None):
        for kind in types:
            if kind not in makers:
                raise ValueError(f"unknown summary type {kind!r}; choose from {sorted(makers)}")
            makers[kind]()
