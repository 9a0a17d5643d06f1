"""The names and collections of the variables Keras creates in a tower.

Keras names a variable after the name scope it is created in (``tower0/dense/kernel``) and does
not go through ``tf.compat.v1.get_variable``, so it escapes what towers rely on: variable
scopes, reuse, and the custom getters that make replicas local variables. Here every Keras
variable is created through ``get_variable`` instead:

- in the tower that builds the model first, under the Keras name without the tower's name
  scope (``dense/kernel``, as a single-tower model names it, so checkpoints match);
- in a tower with variables of its own (replicated training), under the name of tower 0's
  variable created at the same point of the build, in the tower's variable scope
  (``tower1/dense/kernel``), so the replicated builder pairs the copies with tower 0's.
"""

from __future__ import annotations

import contextlib
import enum

from ..compat import tf, tfv1

__all__ = ["Naming", "keras_variables"]


class Naming(enum.Enum):
    """How a tower names the Keras variables it creates."""

    KERAS = "keras"  # Keras's name without the tower's name scope
    REPLICA = "replica"  # the name of tower 0's variable at the same position


def _relative_scope(ns: str, tower_ns: str) -> str:
    if not tower_ns:
        return ns
    if ns == tower_ns:
        return ""
    prefix = tower_ns + "/"
    return ns[len(prefix) :] if ns.startswith(prefix) else ns


def _initializer(initial_value):
    """``get_variable``'s initializer for Keras's initial value (a tensor, or a function of nothing)."""
    if callable(initial_value):
        return lambda shape=None, dtype=None, partition_info=None: initial_value()
    return initial_value


@contextlib.contextmanager
def keras_variables(tower_ns: str, naming: Naming, source: list | None = None):
    """Inside, variables are created by ``get_variable`` with tower names (see the module).

    Args:
        tower_ns: the name scope of the tower.
        naming: how to name them; ``Naming.REPLICA`` needs ``source``, tower 0's variables in
            the order they were created.

    Yields:
        the list of the variables created, in order (filled while the block runs).
    """
    if naming is Naming.REPLICA and source is None:
        raise ValueError("Naming.REPLICA needs the source variables")
    created: list = []
    inside = False

    def creator(next_creator, **kwargs):
        nonlocal inside
        if inside:  # get_variable's own creation, below
            return next_creator(**kwargs)
        leaf = kwargs.get("name") or "Variable"
        shape = kwargs.get("shape")
        if naming is Naming.KERAS:
            scope = _relative_scope(tfv1.get_default_graph().get_name_scope(), tower_ns)
            name = f"{scope}/{leaf}" if scope else leaf
        else:
            name = _replica_name(tower_ns, source, len(created), leaf, shape, kwargs.get("dtype"))
        initial_value = kwargs["initial_value"]
        if not callable(initial_value):
            shape = None  # get_variable takes the shape of a tensor initializer from the tensor
        options = {
            k: kwargs[k]
            for k in ("constraint", "synchronization", "aggregation", "caching_device", "validate_shape")
            if kwargs.get(k) is not None
        }
        if kwargs.get("collections") is not None:
            options["collections"] = kwargs["collections"]
        inside = True
        try:
            var = tfv1.get_variable(
                name,
                shape=shape,
                dtype=kwargs.get("dtype"),
                initializer=_initializer(initial_value),
                trainable=kwargs.get("trainable"),
                use_resource=True,
                **options,
            )
        except ValueError as e:
            raise ValueError(
                f"Keras variable '{leaf}' of layer scope '{tfv1.get_default_graph().get_name_scope()}' "
                f"in tower '{tower_ns}' cannot be created as '{name}': {e}"
            ) from None
        finally:
            inside = False
        created.append(var)
        return var

    with tfv1.variable_creator_scope(creator):
        yield created


def _replica_name(tower_ns: str, source: list, index: int, leaf: str, shape, dtype) -> str:
    if index >= len(source):
        raise ValueError(
            f"tower '{tower_ns}' builds a Keras model with more variables than tower 0's "
            f"({len(source)}; the extra one is '{leaf}'): get_model must build the same model in every tower"
        )
    src = source[index]
    same_dtype = dtype is None or tf.as_dtype(dtype).base_dtype == src.dtype.base_dtype
    if not (same_dtype and tf.TensorShape(shape).is_compatible_with(src.shape)):
        raise ValueError(
            f"tower '{tower_ns}' builds a Keras model that differs from tower 0's: its variable #{index} "
            f"('{leaf}', {dtype} {tf.TensorShape(shape)}) does not match '{src.op.name}' "
            f"({src.dtype.base_dtype.name} {src.shape}); get_model must build the same model in every tower"
        )
    return src.op.name
