"""Regularization costs over a tower's variables, as the reference's ``regularize_cost``.

In a training tower the cost sums ``func(w)`` over the trainable variables whose name matches;
in an inference tower it is a constant 0, so a tower function can add it unconditionally.
Towers with their own variables (replicated training) only regularize their own copies.
"""

from __future__ import annotations

import re

from .. import logger
from ..compat import tf, tfv1
from ..tower import get_current_tower_context, strip_tower_prefix

__all__ = ["l1_regularizer", "l2_regularizer", "regularize_cost", "regularize_cost_from_collection"]

_logged_graphs: set[int] = set()


def l2_regularizer(scale: float):
    """``w -> scale * sum(w**2) / 2``."""
    return lambda w: tf.multiply(float(scale), tf.nn.l2_loss(w), name="l2_regularizer")


def l1_regularizer(scale: float):
    """``w -> scale * sum(|w|)``."""
    return lambda w: tf.multiply(float(scale), tf.reduce_sum(tf.abs(w)), name="l1_regularizer")


def _tower_variables(ctx) -> list:
    if ctx is not None and ctx.has_own_variables:
        return ctx.get_collection_in_tower(tfv1.GraphKeys.TRAINABLE_VARIABLES)
    return tfv1.trainable_variables()


def _empty(name: str):
    return tf.constant(0, dtype=tf.float32, name="empty_" + name)


def regularize_cost(regex: str, func, name: str = "regularize_cost"):
    """The sum of ``func(w)`` over the trainable variables whose op name contains a match of
    ``regex`` (``re.search``), as a float32 scalar named ``name``; 0 outside training.

    Example: ``regularize_cost('.*/W', l2_regularizer(1e-4))``.
    """
    if not regex:
        raise ValueError("regularize_cost needs a non-empty regex")
    ctx = get_current_tower_context()
    if ctx is None:
        raise RuntimeError("regularize_cost must be called inside a tower function (under a TowerContext)")
    if not ctx.is_training:
        return _empty(name)
    params = [v for v in _tower_variables(ctx) if re.search(regex, v.op.name)]
    if not params:
        return _empty(name)
    with tfv1.name_scope(name + "_internals"):
        costs = [tf.cast(func(v), tf.float32) for v in params]
    graph = tfv1.get_default_graph()
    if id(graph) not in _logged_graphs:
        _logged_graphs.add(id(graph))
        logger.info(
            "regularize_cost() applies to %d tensors: %s",
            len(params),
            ", ".join(sorted(strip_tower_prefix(v.op.name) for v in params)),
        )
    return tf.add_n(costs, name=name)


def regularize_cost_from_collection(name: str = "regularize_cost"):
    """The float32 sum of REGULARIZATION_LOSSES (those of this tower when it has its own
    variables) named ``name``; 0 outside training. Never None."""
    ctx = get_current_tower_context()
    if ctx is None:
        raise RuntimeError(
            "regularize_cost_from_collection must be called inside a tower function (under a TowerContext)"
        )
    if not ctx.is_training:
        return _empty(name)
    if ctx.has_own_variables:
        losses = ctx.get_collection_in_tower(tfv1.GraphKeys.REGULARIZATION_LOSSES)
    else:
        losses = tfv1.get_collection(tfv1.GraphKeys.REGULARIZATION_LOSSES)
    if not losses:
        return _empty(name)
    return tf.add_n([tf.cast(x, tf.float32) for x in losses], name=name)
