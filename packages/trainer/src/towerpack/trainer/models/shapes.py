"""ConcatWith: concatenate a tensor with others along an axis, as a layer (for LinearWrap)."""

from __future__ import annotations

from ..compat import tf
from .registry import layer_register

__all__ = ["ConcatWith"]


@layer_register(use_scope=None)
def ConcatWith(x, tensor, dim):
    """``concat([x] + tensor, dim)``; ``tensor`` is one tensor or a list."""
    if not isinstance(tensor, (list, tuple)):
        tensor = [tensor]
    return tf.concat([x, *tensor], dim)
