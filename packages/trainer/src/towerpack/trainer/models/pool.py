"""Pooling layers: MaxPooling, AvgPooling, GlobalAvgPooling and FixedUnPooling."""

from __future__ import annotations

import numpy as np

from ..compat import tf
from ._common import finish, int_pair, padding_name
from .cpu_layout import run_in_layout
from .layer_args import data_format_is_nchw, layer_args
from .registry import layer_register

__all__ = ["AvgPooling", "FixedUnPooling", "GlobalAvgPooling", "MaxPooling"]

_POOL_ALIASES = {"shape": "pool_size", "stride": "strides"}


def _pool(op, op_type: str, inputs, pool_size, strides, padding, data_format):
    nchw = data_format_is_nchw(data_format)
    size = int_pair(pool_size, "pool_size")
    strides = size if strides is None else int_pair(strides, "strides")
    pad = padding_name(padding)
    x = run_in_layout(
        inputs, nchw, op_type, lambda t, layout: op(t, size, strides, pad, data_format=layout.op_format)
    )
    return finish(x)


@layer_register(log_shape=True)
@layer_args(positional=("pool_size", "strides"), aliases=_POOL_ALIASES)
def MaxPooling(inputs, pool_size, strides=None, padding="valid", data_format="channels_last"):
    """Max pooling; ``strides`` defaults to ``pool_size``."""
    return _pool(tf.nn.max_pool2d, "MaxPool", inputs, pool_size, strides, padding, data_format)


@layer_register(log_shape=True)
@layer_args(positional=("pool_size", "strides"), aliases=_POOL_ALIASES)
def AvgPooling(inputs, pool_size, strides=None, padding="valid", data_format="channels_last"):
    """Average pooling; ``strides`` defaults to ``pool_size``."""
    return _pool(tf.nn.avg_pool2d, "AvgPool", inputs, pool_size, strides, padding, data_format)


@layer_register(log_shape=True)
def GlobalAvgPooling(x, data_format="channels_last"):
    """The mean over height and width of a 4-D input: [N, C]."""
    if x.shape.rank != 4:
        raise ValueError(f"GlobalAvgPooling needs a 4-D input, got shape {x.shape}")
    axis = [2, 3] if data_format_is_nchw(data_format) else [1, 2]
    return tf.reduce_mean(x, axis, name="output")


def _zero_fill_2x2(x):
    # out[2i, 2j] = x[i, j], zeros elsewhere (NHWC).
    z = tf.zeros_like(x)
    rows = tf.reshape(
        tf.stack([x, z], axis=3), tf.stack([tf.shape(x)[0], tf.shape(x)[1], -1, tf.shape(x)[3]])
    )
    out = tf.stack([rows, tf.zeros_like(rows)], axis=2)
    return tf.reshape(out, tf.stack([tf.shape(x)[0], -1, tf.shape(rows)[2], tf.shape(x)[3]]))


@layer_register(log_shape=True)
def FixedUnPooling(x, shape, unpool_mat=None, data_format="channels_last"):
    """Unpool by a fixed ``shape`` (sh, sw): each value becomes ``value * unpool_mat`` (a Kronecker
    product); the default matrix has a 1 at the top-left and zeros elsewhere."""
    sh, sw = int_pair(shape, "shape")
    nchw = data_format_is_nchw(data_format)
    if x.shape.rank != 4:
        raise ValueError(f"FixedUnPooling needs a 4-D input, got shape {x.shape}")
    static = x.shape.as_list()
    if nchw:
        x = tf.transpose(x, [0, 2, 3, 1])
    if unpool_mat is None and (sh, sw) == (2, 2):
        out = _zero_fill_2x2(x)
    else:
        if unpool_mat is None:
            mat = np.zeros((sh, sw), dtype="float32")
            mat[0, 0] = 1
        else:
            mat = unpool_mat
        mat = tf.cast(tf.convert_to_tensor(mat), x.dtype, name="unpool_mat")
        if mat.shape.as_list() != [sh, sw]:
            raise ValueError(f"unpool_mat must have shape {[sh, sw]}, got {mat.shape}")
        expanded = x[:, :, None, :, None, :] * tf.reshape(mat, [1, 1, sh, 1, sw, 1])
        dyn = tf.shape(x)
        out = tf.reshape(expanded, tf.stack([dyn[0], dyn[1] * sh, dyn[2] * sw, dyn[3]]))
    if nchw:
        out = tf.transpose(out, [0, 3, 1, 2])
    h_axis, w_axis = (2, 3) if nchw else (1, 2)
    static_out = list(static)
    static_out[h_axis] = static[h_axis] * sh if static[h_axis] else None
    static_out[w_axis] = static[w_axis] * sw if static[w_axis] else None
    out.set_shape(static_out)
    return tf.identity(out, name="output")
