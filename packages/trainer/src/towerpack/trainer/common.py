"""Graph lookups every part of the trainer shares: tensors and ops by name, the global step.

Names follow the reference: ``"x"`` is an op (or its first output when a tensor is asked for),
``"x:0"`` is a tensor.
"""

from __future__ import annotations

from .compat import tf, tfv1

__all__ = [
    "get_global_step_value",
    "get_global_step_var",
    "get_op_or_tensor_by_name",
    "get_op_tensor_name",
    "get_tensors_by_names",
    "get_tf_version_tuple",
]


def get_op_tensor_name(name: str) -> tuple[str, str]:
    """``(op name, tensor name)`` of a name that may or may not end with ``:k``."""
    op, sep, index = name.rpartition(":")
    if sep and index.isdigit():
        return op, name
    return name, name + ":0"


def get_tensors_by_names(names) -> list:
    """The tensors of the default graph with these names (``:0`` is implied)."""
    if isinstance(names, str):
        raise TypeError("get_tensors_by_names takes a list of names, got a single string")
    graph = tfv1.get_default_graph()
    return [graph.get_tensor_by_name(get_op_tensor_name(n)[1]) for n in names]


def get_op_or_tensor_by_name(name):
    """A name with ``:k`` is a tensor, one without is an op; a list gives a list.

    Raises:
        KeyError: nothing in the default graph has that name.
    """
    graph = tfv1.get_default_graph()

    def one(n: str):
        try:
            if ":" in n:
                return graph.get_tensor_by_name(n)
            return graph.get_operation_by_name(n)
        except (KeyError, ValueError) as e:
            raise KeyError(f"the graph has no {'tensor' if ':' in n else 'op'} named {n!r}") from e

    if isinstance(name, str):
        return one(name)
    return [one(n) for n in name]


def get_global_step_var():
    """The int64 ``global_step`` variable of the default graph, created (at the root scope, on the
    CPU) on first use."""
    graph = tfv1.get_default_graph()
    var = tfv1.train.get_global_step(graph)
    if var is not None:
        return var
    with (
        tfv1.variable_scope(tfv1.VariableScope(reuse=False, name="")),
        tfv1.name_scope(None),
        tfv1.device("/cpu:0"),
        tf.control_dependencies(None),
    ):
        return tfv1.train.get_or_create_global_step(graph)


def get_global_step_value() -> int:
    """The value of ``global_step`` in the default session."""
    sess = tfv1.get_default_session()
    if sess is None:
        raise RuntimeError("get_global_step_value() needs a default session (`with sess.as_default():`)")
    return int(sess.run(get_global_step_var()))


def get_tf_version_tuple() -> tuple[int, int]:
    """TensorFlow's ``(major, minor)`` version."""
    major, minor = tf.__version__.split(".")[:2]
    return int(major), int(minor)
