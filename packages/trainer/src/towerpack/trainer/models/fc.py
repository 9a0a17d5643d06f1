"""FullyConnected: a dense layer over the flattened input, with variables ``W`` and ``b``."""

from __future__ import annotations

import numpy as np

from ..compat import tf, tfv1
from ._common import default_kernel_initializer, finish
from .layer_args import layer_args
from .registry import layer_register

__all__ = ["FullyConnected"]


def _flatten(x):
    if x.shape.rank == 2:
        return x
    rest = x.shape.as_list()[1:]
    if None not in rest:
        return tf.reshape(x, [-1, int(np.prod(rest))])
    return tf.reshape(x, tf.stack([tf.shape(x)[0], -1]))


@layer_register(log_shape=True)
@layer_args(positional=("units",), aliases={"out_dim": "units"})
def FullyConnected(
    inputs,
    units,
    activation=None,
    use_bias=True,
    kernel_initializer=None,
    bias_initializer=tfv1.zeros_initializer(),
    kernel_regularizer=None,
    bias_regularizer=None,
    activity_regularizer=None,
):
    """``activation(flatten(x) @ W + b)``: ``W`` [in, units], ``b`` [units]; output ``output``."""
    x = _flatten(inputs)
    in_dim = x.shape[1]
    if in_dim is None:
        raise ValueError(f"FullyConnected needs the input's non-batch size to be known, got {inputs.shape}")
    dtype = x.dtype.base_dtype
    W = tfv1.get_variable(
        "W",
        [int(in_dim), int(units)],
        dtype=dtype,
        initializer=kernel_initializer or default_kernel_initializer(),
        regularizer=kernel_regularizer,
    )
    x = tf.matmul(x, W)
    b = None
    if use_bias:
        b = tfv1.get_variable(
            "b", [int(units)], dtype=dtype, initializer=bias_initializer, regularizer=bias_regularizer
        )
        x = tf.nn.bias_add(x, b)
    return finish(x, activation, activity_regularizer, W=W, b=b)
