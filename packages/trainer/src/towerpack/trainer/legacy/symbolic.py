"""The graph functions tensorpack's ``tfutils.symbolic_functions`` had before 0.11: classification
error vectors, flattening, the Huber and class-balanced losses, scalar variables, guided ReLU and
saliency maps. ``towerpack.trainer.symbolic_functions`` re-exports them, so a star import of it gives
them as ``from tensorpack.tfutils.symbolic_functions import *`` did.

Ops and variables have the reference's names (``incorrect_vector``, ``<name>`` for a scalar variable
and its summary ``<name>-summary``), so callbacks and checkpoints that look for them find them.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from ..compat import tf, tfv1
from .warn import removed

_MODULE = "tensorpack.tfutils.symbolic_functions"

__all__ = [
    "accuracy",
    "batch_flatten",
    "class_balanced_cross_entropy",
    "class_balanced_sigmoid_cross_entropy",
    "flatten",
    "get_scalar_var",
    "guided_relu",
    "huber_loss",
    "prediction_incorrect",
    "saliency_map",
    "shapeless_placeholder",
]

_EPS = 1e-12  # keeps log() finite where a prediction is exactly 0 or 1


def _in_top_k(logits, label, topk: int):
    return tfv1.nn.in_top_k(predictions=logits, targets=label, k=topk)


@removed(_MODULE)
def prediction_incorrect(logits, label, topk: int = 1, name: str = "incorrect_vector"):
    """A float32 vector [B]: 1.0 where ``label`` (int [B]) is not among the ``topk`` largest of
    its row of ``logits`` [B, C], else 0.0."""
    return tf.cast(tf.logical_not(_in_top_k(logits, label, topk)), tf.float32, name=name)


@removed(_MODULE)
def accuracy(logits, label, topk: int = 1, name: str = "accuracy"):
    """The fraction of rows whose ``label`` is among the ``topk`` largest ``logits``, a scalar."""
    return tf.reduce_mean(tf.cast(_in_top_k(logits, label, topk), tf.float32), name=name)


@removed(_MODULE)
def flatten(x):
    """``x`` as a vector."""
    return tf.reshape(x, [-1])


def _batch_flatten(x):
    rest = x.shape.as_list()[1:]
    if None not in rest:
        return tf.reshape(x, [-1, int(np.prod(rest))])
    return tf.reshape(x, tf.stack([tf.shape(x)[0], -1]))


@removed(_MODULE)
def batch_flatten(x):
    """``x`` as a matrix [B, everything else]; the second dimension is static when it can be."""
    return _batch_flatten(x)


@removed(_MODULE)
def huber_loss(x, delta: float = 1, name: str = "huber_loss"):
    """The elementwise Huber loss of the difference ``x``: ``x**2 / 2`` where ``|x| < delta``, else
    ``delta * |x| - delta**2 / 2``."""
    with tfv1.name_scope("huber_loss"):
        magnitude = tf.abs(x)
        quadratic = tf.square(x) * 0.5
        linear = magnitude * delta - 0.5 * delta**2
        small = magnitude < delta
    return tf.where(small, quadratic, linear, name=name)


@removed(_MODULE)
def get_scalar_var(name: str, init_value: float, summary: bool = False, trainable: bool = False):
    """A float32 scalar variable ``name`` starting at ``init_value`` (not trainable unless asked),
    e.g. a learning rate that ``ScheduledHyperParamSetter('learning_rate', ...)`` sets. With
    ``summary``, a scalar summary ``<name>-summary`` of it."""
    var = tfv1.get_variable(name, initializer=float(init_value), trainable=trainable)
    if summary:
        tfv1.summary.scalar(name + "-summary", var)
    return var


def _class_weights(y):
    """beta, the fraction of negatives in the {0, 1} labels ``y``, and the count of positives."""
    negatives = tf.reduce_sum(1.0 - y)
    positives = tf.reduce_sum(y)
    return negatives / (negatives + positives), positives


@removed(_MODULE)
def class_balanced_cross_entropy(pred, label, name: str = "cross_entropy_loss"):
    """The class-balanced cross entropy of HED (Xie & Tu, 2015) for predictions ``pred`` in [0, 1]
    and {0, 1} labels of the same shape: positives weighted by the fraction of negatives (beta),
    negatives by 1 - beta."""
    with tfv1.name_scope("class_balanced_cross_entropy"):
        z = _batch_flatten(pred)
        y = tf.cast(_batch_flatten(label), tf.float32)
        beta, _ = _class_weights(y)
        loss_pos = -beta * tf.reduce_mean(y * tf.math.log(z + _EPS))
        loss_neg = (1.0 - beta) * tf.reduce_mean((1.0 - y) * tf.math.log(1.0 - z + _EPS))
    return tf.subtract(loss_pos, loss_neg, name=name)


@removed(_MODULE)
def class_balanced_sigmoid_cross_entropy(logits, label, name: str = "cross_entropy_loss"):
    """:func:`class_balanced_cross_entropy` computed from logits (numerically stable); 0 when
    there is no positive label."""
    with tfv1.name_scope("class_balanced_sigmoid_cross_entropy"):
        y = tf.cast(label, tf.float32)
        beta, positives = _class_weights(y)
        per_element = tf.nn.weighted_cross_entropy_with_logits(
            labels=y, logits=logits, pos_weight=beta / (1.0 - beta)
        )
        cost = tf.reduce_mean(per_element * (1.0 - beta))
        no_positive = tf.equal(positives, 0.0)
    return tf.where(no_positive, 0.0, cost, name=name)


_GUIDED_RELU = "TowerpackGuidedRelu"
_registered = threading.Lock()
_is_registered = False


def _register_guided_relu() -> None:
    global _is_registered
    with _registered:
        if _is_registered:
            return

        @tf.RegisterGradient(_GUIDED_RELU)
        def _guided_relu_grad(op, grad):
            # The ReLU's own gradient (where its output is positive), and only positive gradients.
            passes = tf.logical_and(grad > 0.0, op.outputs[0] > 0.0)
            return tf.where(passes, grad, tf.zeros_like(grad))

        _is_registered = True


@removed(_MODULE)
@contextlib.contextmanager
def guided_relu():
    """A context in which the gradient of ``tf.nn.relu`` ops built inside is guided
    back-propagation (Springenberg et al., 2014): only positive gradients pass, where the ReLU
    was active."""
    _register_guided_relu()
    with tfv1.get_default_graph().gradient_override_map({"Relu": _GUIDED_RELU}):
        yield


@removed(_MODULE)
def saliency_map(output, input, name: str = "saliency_map"):
    """The gradient of each row's largest ``output`` with respect to ``input`` (Simonyan et al.,
    2013): a tensor shaped like ``input``."""
    gradient = tfv1.gradients(tf.reduce_max(output, 1), input)[0]
    return tf.identity(gradient, name=name)


@removed(_MODULE)
def shapeless_placeholder(x, axis, name: str):
    """``x``, feedable with values whose ``axis`` dimensions (an int or a list) differ: a
    placeholder that defaults to ``x``, with those dimensions unknown in its static shape.

    Raises:
        ValueError: one of the dimensions is unknown already.
    """
    shape = x.shape.as_list()
    for a in axis if isinstance(axis, list | tuple) else [axis]:
        if shape[a] is None:
            raise ValueError(f"shapeless_placeholder: axis {a} of shape {shape} is already unknown")
        shape[a] = None
    return tfv1.placeholder_with_default(x, shape=shape, name=name)
