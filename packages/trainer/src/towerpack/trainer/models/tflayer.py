"""TensorFlow's layer functions (``tf.compat.v1.layers``, from tf-keras) under the variable names of
towerpack's layers: inside ``rename_tflayer_get_variable()``, ``conv0/kernel`` is created as
``conv0/W``, so such a model loads checkpoints of the reference's layers and the other way round.
"""

from __future__ import annotations

from ..varreplace import custom_getter_scope

__all__ = ["rename_get_variable", "rename_tflayer_get_variable"]

# tf.layers' variable names -> the reference's.
TFLAYER_NAMES = {"kernel": "W", "bias": "b", "moving_mean": "mean/EMA", "moving_variance": "variance/EMA"}


def rename_get_variable(mapping: dict):
    """A context in which ``get_variable`` creates (or reuses) ``scope/new`` when asked for
    ``scope/old``, for each ``old: new`` of ``mapping`` (the last part of the name only)."""

    def getter(getter, name, *args, **kwargs):
        scope, _, base = name.rpartition("/")
        if base in mapping:
            name = f"{scope}/{mapping[base]}" if scope else mapping[base]
        return getter(name, *args, **kwargs)

    return custom_getter_scope(getter)


def rename_tflayer_get_variable():
    """A context in which the variables of ``tf.compat.v1.layers`` get the reference's names:
    ``kernel`` -> ``W``, ``bias`` -> ``b``, ``moving_mean`` -> ``mean/EMA``, ``moving_variance``
    -> ``variance/EMA``.

    Example::

        with rename_tflayer_get_variable():
            y = tfv1.layers.dense(x, 10, name="fc")  # variables fc/W and fc/b
    """
    return rename_get_variable(TFLAYER_NAMES)
