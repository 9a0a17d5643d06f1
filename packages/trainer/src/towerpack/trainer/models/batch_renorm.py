"""BatchRenorm (Ioffe 2017): batch normalization corrected towards the moving statistics.

In training, ``x_hat = (x - mean_B) / std_B * r + d`` with ``r = clip(std_B / std, 1/rmax, rmax)``
and ``d = clip((mean_B - mean) / std, -dmax, dmax)`` (no gradient through r and d), where mean and
std are moving averages of the batch statistics (momentum 0.99). Inference uses ``moving_mean``
and ``moving_variance``. Variable names are TensorFlow's (``moving_mean``, ``moving_variance``,
``renorm_mean``, ``renorm_stddev``, ``gamma``, ``beta``), as in the reference.
"""

from __future__ import annotations

from ..collection import add_to_collection_once
from ..compat import tf, tfv1
from ..tower import get_current_tower_context
from ._common import finish
from .layer_args import data_format_is_nchw, layer_args
from .registry import layer_register

__all__ = ["BatchRenorm"]

RENORM_MOMENTUM = 0.99


def _ema(var, value, momentum: float):
    return var.assign_sub((var - tf.stop_gradient(value)) * (1.0 - momentum), read_value=False)


@layer_register()
@layer_args(
    positional=("rmax", "dmax"),
    aliases={
        "use_bias": "center",
        "use_scale": "scale",
        "gamma_init": "gamma_initializer",
        "decay": "momentum",
    },
)
def BatchRenorm(
    x,
    rmax,
    dmax,
    *,
    momentum=0.9,
    epsilon=1e-5,
    center=True,
    scale=True,
    gamma_initializer=None,
    data_format="channels_last",
):
    """Batch renormalization of a 2-D or 4-D input; trains when the TowerContext does."""
    ctx = get_current_tower_context()
    if ctx is None:
        raise RuntimeError("BatchRenorm must be called inside a tower function (under a TowerContext)")
    ndims = x.shape.rank
    if ndims not in (2, 4):
        raise ValueError(f"BatchRenorm needs a 2-D or 4-D input, got shape {x.shape}")
    axis = 1 if ndims == 2 or data_format_is_nchw(data_format) else 3
    num_chan = x.shape[axis]
    if num_chan is None:
        raise ValueError(f"BatchRenorm needs the number of channels to be known, got shape {x.shape}")
    shape = [1] * ndims
    shape[axis] = -1
    dtype = x.dtype.base_dtype

    def var(name, init, trainable=True):
        return tfv1.get_variable(name, [int(num_chan)], dtype, initializer=init, trainable=trainable)

    zeros, ones = tfv1.zeros_initializer(), tfv1.ones_initializer()
    beta = var("beta", zeros) if center else None
    gamma = var("gamma", gamma_initializer or ones) if scale else None
    moving_mean = var("moving_mean", zeros, trainable=False)
    moving_var = var("moving_variance", ones, trainable=False)
    renorm_mean = var("renorm_mean", zeros, trainable=False)
    renorm_std = var("renorm_stddev", ones, trainable=False)
    main = ctx.is_main_training_tower
    if main:
        add_to_collection_once(
            tfv1.GraphKeys.MODEL_VARIABLES, moving_mean, moving_var, renorm_mean, renorm_std
        )
    b = lambda t: tf.reshape(t, shape) if t is not None else None

    if not ctx.is_training:
        y = tf.nn.batch_normalization(x, b(moving_mean), b(moving_var), b(beta), b(gamma), epsilon)
        return finish(y, beta=beta, gamma=gamma)

    reduce_axes = [a for a in range(ndims) if a != axis]
    mean, variance = tf.nn.moments(x, reduce_axes)
    std = tf.sqrt(variance + epsilon)
    r = tf.stop_gradient(tf.clip_by_value(std / renorm_std, 1.0 / rmax, rmax))
    d = tf.stop_gradient(tf.clip_by_value((mean - renorm_mean) / renorm_std, -dmax, dmax))
    x_hat = (x - b(mean)) / b(std) * b(r) + b(d)
    y = x_hat
    if gamma is not None:
        y = y * b(gamma)
    if beta is not None:
        y = y + b(beta)
    if main:
        for op in (
            _ema(moving_mean, mean, momentum),
            _ema(moving_var, variance, momentum),
            _ema(renorm_mean, mean, RENORM_MOMENTUM),
            _ema(renorm_std, std, RENORM_MOMENTUM),
        ):
            tfv1.add_to_collection(tfv1.GraphKeys.UPDATE_OPS, op)
    return finish(y, beta=beta, gamma=gamma)
