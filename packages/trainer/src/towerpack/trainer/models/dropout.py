"""Dropout that knows whether it trains: from the TowerContext, or ``training=``."""

from __future__ import annotations

from .. import logger
from ..compat import tf
from ..tower import get_current_tower_context
from .registry import layer_register

__all__ = ["Dropout"]


@layer_register(use_scope=None)
def Dropout(x, *args, **kwargs):
    """Drop each value with probability ``rate`` (default 0.5) while training; identity otherwise.

    Called as ``Dropout(x, rate=0.3)``, ``Dropout(x, keep_prob=0.7)`` or (old style) with
    ``keep_prob`` as the first positional. ``training`` (alias ``is_training``) defaults to
    the TowerContext's. ``rate`` may be a tensor.
    """
    if "is_training" in kwargs:
        if "training" in kwargs:
            raise TypeError("Dropout() got both 'is_training' and 'training'")
        kwargs["training"] = kwargs.pop("is_training")
    if args:
        if len(args) > 1 or "keep_prob" in kwargs or "rate" in kwargs:
            raise TypeError("Dropout() takes one positional (keep_prob) and no other rate")
        if args[0] != 0.5:
            logger.warning(
                "Dropout's first positional argument is keep_prob (the old meaning); pass rate= to be "
                "explicit"
            )
        kwargs["keep_prob"] = args[0]
    if "keep_prob" in kwargs and "rate" in kwargs:
        raise TypeError("Dropout() takes keep_prob= or rate=, not both")
    rate = 1 - kwargs.pop("keep_prob") if "keep_prob" in kwargs else kwargs.pop("rate", 0.5)
    training = kwargs.pop("training", None)
    noise_shape, seed = kwargs.pop("noise_shape", None), kwargs.pop("seed", None)
    if kwargs:
        raise TypeError(f"Dropout() got unexpected argument(s): {', '.join(sorted(kwargs))}")
    if training is None:
        ctx = get_current_tower_context()
        if ctx is None:
            raise RuntimeError("Dropout needs a TowerContext to know whether it trains (or pass training=)")
        training = ctx.is_training
    if not training:
        return tf.identity(x, name="output")
    return tf.identity(tf.nn.dropout(x, rate=rate, noise_shape=noise_shape, seed=seed), name="output")
