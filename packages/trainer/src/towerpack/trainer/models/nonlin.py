"""Activations that are layers: BNReLU, LeakyReLU, PReLU and Maxout."""

from __future__ import annotations

from ..compat import tf, tfv1
from .batch_norm import BatchNorm
from .registry import layer_register
from .variable_holder import VariableHolder

__all__ = ["BNReLU", "LeakyReLU", "Maxout", "PReLU"]


@layer_register(use_scope=None)
def BNReLU(x, name=None):
    """``relu(BatchNorm('bn', x))``. Given as a layer's ``activation``, its variables are
    ``<layer>/bn/...``; called as ``BNReLU('name', x)``, ``name/bn/...``."""
    return tf.nn.relu(BatchNorm("bn", x), name=name)


@layer_register(use_scope=None)
def LeakyReLU(x, alpha=0.2, name="output"):
    """``max(x, alpha * x)``."""
    return tf.maximum(x, alpha * x, name=name)


@layer_register()
def PReLU(x, init=0.001, name=None):
    """Parametric ReLU with a learned scalar ``alpha``: ``0.5 * ((1 + a) x + (1 - a) |x|)``."""
    alpha = tfv1.get_variable("alpha", [], x.dtype.base_dtype, initializer=tfv1.constant_initializer(init))
    out = tf.multiply(0.5, (1 + alpha) * x + (1 - alpha) * tf.abs(x), name=name or "output")
    out.variables = VariableHolder(alpha=alpha)
    return out


@layer_register(use_scope=None)
def Maxout(x, num_unit):
    """The maximum over groups of ``num_unit`` channels (2-D, or 4-D NHWC input)."""
    ndims = x.shape.rank
    if ndims not in (2, 4):
        raise ValueError(f"Maxout needs a 2-D or 4-D (NHWC) input, got shape {x.shape}")
    ch = x.shape[-1]
    if ch is None or int(ch) % num_unit:
        raise ValueError(f"Maxout: the channels ({ch}) must be known and divisible by num_unit={num_unit}")
    groups = int(ch) // num_unit
    if ndims == 4:
        h, w = x.shape[1], x.shape[2]
        x = tf.reshape(x, [-1, h if h is not None else -1, w, groups, num_unit])
    else:
        x = tf.reshape(x, [-1, groups, num_unit])
    return tf.reduce_max(x, axis=ndims, name="output")
