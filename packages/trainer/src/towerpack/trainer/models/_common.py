"""Small pieces the layers share: default initializer, integer pairs, padding, the ``output`` op."""

from __future__ import annotations

from ..compat import tf, tfv1
from .variable_holder import VariableHolder

__all__ = ["default_kernel_initializer", "finish", "int_pair", "padding_name"]


def default_kernel_initializer():
    """He initialization (variance scaling, scale 2, fan-in, normal), the reference's default."""
    return tfv1.variance_scaling_initializer(scale=2.0, mode="fan_in", distribution="untruncated_normal")


def int_pair(value, what: str) -> list[int]:
    """``3`` or ``(3, 3)`` -> ``[3, 3]``."""
    if isinstance(value, (list, tuple)):
        if len(value) != 2:
            raise ValueError(f"{what} must be an int or a pair of ints, got {value!r}")
        return [int(v) for v in value]
    return [int(value), int(value)]


def padding_name(padding: str) -> str:
    """``'same'``/``'valid'`` in any case -> TensorFlow's ``'SAME'``/``'VALID'``."""
    name = str(padding).upper()
    if name not in ("SAME", "VALID"):
        raise ValueError(f"padding must be 'same' or 'valid', got {padding!r}")
    return name


def finish(x, activation=None, activity_regularizer=None, **variables):
    """Apply the activation, record the activity regularization, name the result ``output`` and
    attach the layer's variables as ``output.variables``."""
    if activation is not None:
        x = activation(x)
    if activity_regularizer is not None:
        loss = activity_regularizer(x)
        if loss is not None:
            tfv1.add_to_collection(tfv1.GraphKeys.REGULARIZATION_LOSSES, loss)
    out = tf.identity(x, name="output")
    out.variables = VariableHolder(**{k: v for k, v in variables.items() if v is not None})
    return out
