"""LayerNorm and InstanceNorm: normalization by each sample's own statistics (no moving averages)."""

from __future__ import annotations

from .. import logger
from ..compat import tf, tfv1
from ._common import finish
from .layer_args import data_format_is_nchw, layer_args
from .registry import layer_register

__all__ = ["InstanceNorm", "LayerNorm"]

_NORM_ALIASES = {"use_bias": "center", "use_scale": "scale", "gamma_init": "gamma_initializer"}


def _affine(x, mean, var, num_chan, param_shape, epsilon, center, scale, gamma_initializer):
    dtype = x.dtype.base_dtype
    beta = gamma = None
    offset = scale_t = None
    if center:
        beta = tfv1.get_variable("beta", [num_chan], dtype, initializer=tfv1.zeros_initializer())
        offset = tf.reshape(beta, param_shape)
    if scale:
        gamma = tfv1.get_variable("gamma", [num_chan], dtype, initializer=gamma_initializer)
        scale_t = tf.reshape(gamma, param_shape)
    y = tf.nn.batch_normalization(x, mean, var, offset, scale_t, epsilon)
    return finish(y, beta=offset, gamma=scale_t)


@layer_register()
@layer_args(positional=(), aliases=_NORM_ALIASES)
def LayerNorm(
    x,
    epsilon=1e-5,
    *,
    center=True,
    scale=True,
    gamma_initializer=tfv1.ones_initializer(),
    data_format="channels_last",
):
    """Layer normalization of a 2-D or 4-D input: moments over every non-batch axis; ``beta``
    and ``gamma`` [C] per channel."""
    ndims = x.shape.rank
    if ndims not in (2, 4):
        raise ValueError(f"LayerNorm needs a 2-D or 4-D input, got shape {x.shape}")
    nchw = ndims == 4 and data_format_is_nchw(data_format)
    axis = 1 if ndims == 2 or nchw else 3
    num_chan = x.shape[axis]
    if num_chan is None:
        raise ValueError(f"LayerNorm needs the number of channels to be known, got shape {x.shape}")
    mean, var = tf.nn.moments(x, list(range(1, ndims)), keepdims=True)
    param_shape = [1, -1] if ndims == 2 else ([1, -1, 1, 1] if nchw else [1, 1, 1, -1])
    return _affine(x, mean, var, int(num_chan), param_shape, epsilon, center, scale, gamma_initializer)


@layer_register()
@layer_args(positional=(), aliases={"gamma_init": "gamma_initializer"})
def InstanceNorm(
    x,
    epsilon=1e-5,
    *,
    center=True,
    scale=True,
    gamma_initializer=tfv1.ones_initializer(),
    data_format="channels_last",
    use_affine=None,
):
    """Instance normalization of a 4-D input: moments over height and width of each sample and
    channel. ``use_affine`` (deprecated) sets both ``center`` and ``scale``."""
    if use_affine is not None:
        logger.warning("InstanceNorm(use_affine=...) is deprecated; use center= and scale=")
        center = scale = bool(use_affine)
    if x.shape.rank != 4:
        raise ValueError(f"InstanceNorm needs a 4-D input, got shape {x.shape}")
    nchw = data_format_is_nchw(data_format)
    num_chan = x.shape[1 if nchw else 3]
    if num_chan is None:
        raise ValueError(f"InstanceNorm needs the number of channels to be known, got shape {x.shape}")
    mean, var = tf.nn.moments(x, [2, 3] if nchw else [1, 2], keepdims=True)
    param_shape = [1, -1, 1, 1] if nchw else [1, 1, 1, -1]
    return _affine(x, mean, var, int(num_chan), param_shape, epsilon, center, scale, gamma_initializer)
