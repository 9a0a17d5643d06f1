"""Change what ``tf.compat.v1.get_variable`` returns inside a block: a custom getter for the
current variable scope, a function applied to every variable (e.g. quantization), or frozen
variables (fine-tuning only part of a model).

Only variables obtained through ``get_variable`` inside the block are affected.
"""

from __future__ import annotations

import contextlib

from .collection import add_to_collection_once
from .compat import tf, tfv1

__all__ = ["custom_getter_scope", "freeze_variables", "remap_variables"]


@contextlib.contextmanager
def custom_getter_scope(custom_getter):
    """Re-enter the current variable scope with ``custom_getter`` (chained after the getters of
    enclosing scopes), without opening a new name scope."""
    scope = tfv1.get_variable_scope()
    with tfv1.variable_scope(scope, custom_getter=custom_getter, auxiliary_name_scope=False):
        yield


def remap_variables(fn):
    """Inside, ``get_variable`` returns ``fn(variable)`` instead of the variable.

    Example (binary weights)::

        with remap_variables(lambda v: tf.sign(v) if "W" in v.op.name else v):
            logits = model(x)
    """

    def getter(getter, *args, **kwargs):
        return fn(getter(*args, **kwargs))

    return custom_getter_scope(getter)


def freeze_variables(stop_gradient: bool = True, skip_collection: bool = False):
    """Inside, variables that would be trainable are frozen.

    Args:
        stop_gradient: ``get_variable`` returns ``tf.stop_gradient(v)`` (named
            ``freezed_<name>``), so no gradient reaches them; they stay in TRAINABLE_VARIABLES.
        skip_collection: create them as non-trainable (and add them to MODEL_VARIABLES so that
            checkpoints and ``dump_session_params`` keep them); this must be active where the
            variable is created.
    """

    def getter(getter, *args, **kwargs):
        trainable = kwargs.get("trainable", True)
        name = args[0] if args else kwargs.get("name")
        if skip_collection:
            kwargs["trainable"] = False
        v = getter(*args, **kwargs)
        if trainable and skip_collection:
            add_to_collection_once(tfv1.GraphKeys.MODEL_VARIABLES, v)
        if trainable and stop_gradient:
            v = tf.stop_gradient(v, name="freezed_" + name)
        return v

    return custom_getter_scope(getter)
