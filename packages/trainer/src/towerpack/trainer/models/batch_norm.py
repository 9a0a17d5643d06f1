"""BatchNorm, as the reference's: its variable names, EMA rule, modes, and synchronized statistics.

Variables (in the layer's scope): ``beta``, ``gamma`` (trainable), ``mean/EMA`` and
``variance/EMA`` (the moving averages used at inference). In training the batch's statistics
normalize the input and, in the main training tower only, update the moving averages:
``ema <- ema - (1 - momentum) * (ema - batch_stat)``.

``sync_statistics`` computes the batch statistics over every tower of the process (``'nccl'``)
or every Horovod rank (``'horovod'``): N replicas at batch b then normalize as one at batch N*b.
"""

from __future__ import annotations

import enum

from .. import logger
from ..collection import add_to_collection_once
from ..compat import tf, tfv1
from ..tower import get_current_tower_context
from .batch_norm_sync import SyncMode, synchronized_moments
from .layer_args import data_format_is_nchw, layer_args
from .registry import layer_register
from .variable_holder import VariableHolder

__all__ = ["BatchNorm", "EMAUpdate"]

_BN_ALIASES = {
    "use_bias": "center",
    "use_scale": "scale",
    "gamma_init": "gamma_initializer",
    "decay": "momentum",
    "use_local_stat": "training",
}
_warned_frozen: set[tuple[int, str]] = set()
# What TensorFlow's fused kernel takes; others (float64) use separate moments, as Keras does.
_FUSED_DTYPES = (tf.float16, tf.bfloat16, tf.float32)


class EMAUpdate(enum.Enum):
    """When the moving averages are updated (``ema_update=``).

    COLLECTION: the update ops go to UPDATE_OPS and the ``RunUpdateOps`` callback (a default)
    runs them with every step; INTERNAL: the layer's output depends on them, so they run
    whenever the output is computed; SKIP: never.
    """

    COLLECTION = "collection"
    INTERNAL = "internal"
    SKIP = "skip"

    @classmethod
    def parse(cls, value) -> EMAUpdate:
        if isinstance(value, cls):
            return value
        if value == "default":
            return cls.COLLECTION
        try:
            return cls(value)
        except ValueError:
            raise ValueError(
                f"ema_update must be 'default', 'collection', 'internal' or 'skip', got {value!r}"
            ) from None


def _param_dtype(x):
    # Half-precision inputs keep their statistics and parameters in float32.
    return tf.float32 if x.dtype.base_dtype in (tf.float16, tf.bfloat16) else x.dtype.base_dtype


def _create_params(num_chan, dtype, center, scale, beta_initializer, gamma_initializer, main_tower):
    beta = (
        tfv1.get_variable("beta", [num_chan], dtype, initializer=beta_initializer)
        if center
        else tf.zeros([num_chan], dtype, name="beta")
    )
    gamma = (
        tfv1.get_variable("gamma", [num_chan], dtype, initializer=gamma_initializer)
        if scale
        else tf.ones([num_chan], dtype, name="gamma")
    )
    mean = tfv1.get_variable(
        "mean/EMA", [num_chan], dtype, initializer=tfv1.zeros_initializer(), trainable=False
    )
    variance = tfv1.get_variable(
        "variance/EMA", [num_chan], dtype, initializer=tfv1.ones_initializer(), trainable=False
    )
    if main_tower:
        add_to_collection_once(tfv1.GraphKeys.MODEL_VARIABLES, mean, variance)
    return beta, gamma, mean, variance


def _broadcast(t, ndims: int, axis: int):
    if ndims == 4 and axis == 1:
        return tf.reshape(t, [1, -1, 1, 1])
    return t


def _normalize(x, mean, variance, beta, gamma, epsilon, ndims, axis):
    b = lambda t: tf.cast(_broadcast(t, ndims, axis), x.dtype)
    return tf.nn.batch_normalization(x, b(mean), b(variance), b(beta), b(gamma), epsilon)


def _ghost_moments(x, virtual_batch_size: int, axis: int):
    """Normalize groups of ``virtual_batch_size`` samples by their own statistics; returns the
    normalized (not yet scaled) input and the first group's mean and variance."""
    ndims = x.shape.rank
    rest = x.shape.as_list()[1:]
    if None in rest:
        raise ValueError(f"BatchNorm(virtual_batch_size=...) needs a known non-batch shape, got {x.shape}")
    grouped = tf.reshape(x, [-1, virtual_batch_size, *rest])
    reduce_axes = [1] + [a + 1 for a in range(1, ndims) if a != axis]
    mean, variance = tf.nn.moments(grouped, reduce_axes, keepdims=True)
    flat = lambda t: tf.reshape(t[0], [-1])
    return grouped, mean, variance, flat(mean), flat(variance)


@layer_register()
@layer_args(positional=(), aliases=_BN_ALIASES)
def BatchNorm(
    inputs,
    axis=None,
    *,
    training=None,
    momentum=0.9,
    epsilon=1e-5,
    center=True,
    scale=True,
    beta_initializer=tfv1.zeros_initializer(),
    gamma_initializer=tfv1.ones_initializer(),
    virtual_batch_size=None,
    data_format="channels_last",
    ema_update="default",
    sync_statistics=None,
):
    """Batch normalization of a 2-D or 4-D input over its channel axis.

    Args:
        axis: the channel axis (1 or 3); default 1 for 2-D inputs, else from ``data_format``.
        training: use the batch's statistics (True) or the moving averages (False); default: the
            TowerContext's ``is_training``. ``training=False`` in a training tower freezes the
            statistics (fine-tuning); gradients still flow to beta and gamma.
        momentum, epsilon, center, scale, beta_initializer, gamma_initializer: as usual.
        virtual_batch_size: normalize groups of this many samples by their own statistics
            ("ghost" batch norm); the moving averages follow the first group.
        ema_update: ``'default'`` (= ``'collection'``), ``'collection'``, ``'internal'`` or
            ``'skip'``; see ``EMAUpdate``. Synchronized and ghost statistics always update
            internally (unless ``'skip'``).
        sync_statistics: None, ``'nccl'`` (all towers of this process; on CPU devices the
            host reduces) or ``'horovod'`` (all Horovod ranks). Every tower/rank must run the
            same BatchNorm layers, with the same names, at the same per-replica batch size.

    Returns: the output (``output``); ``output.variables`` has mean/moving_mean,
    variance/moving_variance, gamma and beta.
    """
    ctx = get_current_tower_context()
    x = inputs
    ndims = x.shape.rank
    if ndims not in (2, 4):
        raise ValueError(f"BatchNorm needs a 2-D or 4-D input, got shape {x.shape}")
    if axis is None:
        axis = 1 if ndims == 2 or data_format_is_nchw(data_format) else 3
    else:
        data_format_is_nchw(data_format)  # validates the name
    if axis not in ((1,) if ndims == 2 else (1, 3)):
        raise ValueError(f"BatchNorm axis must be the channel axis (1, or 3 for NHWC), got {axis}")
    num_chan = x.shape[axis]
    if num_chan is None:
        raise ValueError(f"BatchNorm needs the number of channels to be known, got shape {x.shape}")
    if training is None:
        if ctx is None:
            raise RuntimeError(
                "BatchNorm needs a TowerContext to know whether it trains (or pass training=True/False)"
            )
        training = ctx.is_training
    if isinstance(training, (tf.Tensor, tf.Variable)):
        raise TypeError("BatchNorm(training=...) takes a Python bool, not a tensor")
    training = bool(training)
    ctx_training = ctx.is_training if ctx is not None else training
    main_tower = ctx is None or ctx.is_main_training_tower
    mode = EMAUpdate.parse(ema_update)
    sync = SyncMode.parse(sync_statistics)
    if sync is not None and virtual_batch_size is not None:
        raise ValueError("BatchNorm cannot combine sync_statistics with virtual_batch_size")
    if not training:
        virtual_batch_size = None
        if ctx_training and main_tower:
            _warn_frozen()

    dtype = _param_dtype(x)
    beta, gamma, moving_mean, moving_var = _create_params(
        int(num_chan), dtype, center, scale, beta_initializer, gamma_initializer, main_tower
    )
    nchw = ndims == 4 and axis == 1

    fused = ndims == 4 and x.dtype.base_dtype in _FUSED_DTYPES
    if not training:
        if fused:
            y, _, _ = tfv1.nn.fused_batch_norm(
                x, gamma, beta, moving_mean, moving_var, epsilon=epsilon,
                data_format="NCHW" if nchw else "NHWC", is_training=False,
            )  # fmt: skip
        else:
            y = _normalize(x, moving_mean, moving_var, beta, gamma, epsilon, ndims, axis)
        return _output(y, moving_mean, moving_var, beta, gamma, center, scale)

    if sync is not None and ctx_training:
        mean, var = synchronized_moments(x, axis, sync, ctx)
        y = _normalize(x, mean, var, beta, gamma, epsilon, ndims, axis)
        mode = EMAUpdate.SKIP if mode is EMAUpdate.SKIP else EMAUpdate.INTERNAL
    elif virtual_batch_size is not None:
        grouped, g_mean, g_var, mean, var = _ghost_moments(x, int(virtual_batch_size), axis)
        shape = [1] * (ndims + 1)
        shape[axis + 1] = -1
        b = lambda t: tf.reshape(tf.cast(t, x.dtype), shape)
        y = tf.nn.batch_normalization(grouped, g_mean, g_var, b(beta), b(gamma), epsilon)
        y = tf.reshape(y, tf.shape(x))
        mode = EMAUpdate.SKIP if mode is EMAUpdate.SKIP else EMAUpdate.INTERNAL
    elif fused:
        # The fused kernel normalizes by the biased variance and returns the unbiased one, which
        # (as in the reference) is what the moving average follows.
        y, mean, var = tfv1.nn.fused_batch_norm(
            x, gamma, beta, epsilon=epsilon, data_format="NCHW" if nchw else "NHWC", is_training=True
        )
    else:
        mean, var = tf.nn.moments(x, [a for a in range(ndims) if a != axis])
        y = _normalize(x, mean, var, beta, gamma, epsilon, ndims, axis)

    update = training and (main_tower or not ctx_training) and mode is not EMAUpdate.SKIP
    if update:
        updates = [
            _ema_op(moving_mean, mean, momentum, "mean_ema_op"),
            _ema_op(moving_var, var, momentum, "var_ema_op"),
        ]
        if mode is EMAUpdate.COLLECTION:
            for op in updates:
                tfv1.add_to_collection(tfv1.GraphKeys.UPDATE_OPS, op)
        else:
            with tf.control_dependencies(updates):
                y = tf.identity(y)
    return _output(y, moving_mean, moving_var, beta, gamma, center, scale)


def _ema_op(ema, value, momentum: float, name: str):
    value = tf.cast(tf.stop_gradient(value), ema.dtype.base_dtype)
    return ema.assign_sub((ema - value) * (1.0 - momentum), name=name, read_value=False)


def _warn_frozen() -> None:
    key = (id(tfv1.get_default_graph()), tfv1.get_variable_scope().name)
    if key not in _warned_frozen:
        _warned_frozen.add(key)
        logger.warning(
            "BatchNorm %s runs with training=False in a training tower: it normalizes with the moving "
            "averages and does not update them (gradients still reach beta and gamma)",
            key[1],
        )


def _output(y, mean, variance, beta, gamma, center, scale):
    out = tf.identity(y, name="output")
    params = {"mean": mean, "moving_mean": mean, "variance": variance, "moving_variance": variance}
    if scale:
        params["gamma"] = gamma
    if center:
        params["beta"] = beta
    out.variables = VariableHolder(**params)
    return out
