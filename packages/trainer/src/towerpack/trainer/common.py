"""Graph lookups every part of the trainer shares: tensors and ops by name, the global step, the
default session's devices; the default session config. ``collect_env_info`` (the environment for
bug reports) lives in ``collect_env`` and is importable from here, as in the reference.

Names follow the reference: ``"x"`` is an op (or its first output when a tensor is asked for),
``"x:0"`` is a tensor.
"""

from __future__ import annotations

import re

from .collect_env import collect_env_info
from .compat import tf, tfv1

__all__ = [
    "collect_env_info",
    "get_default_sess_config",
    "get_global_step_value",
    "get_global_step_var",
    "get_op_or_tensor_by_name",
    "get_op_tensor_name",
    "get_tensors_by_names",
    "get_tf_version_tuple",
    "gpu_available_in_session",
]


def full_match(regex: str, name: str) -> bool:
    """Whether ``regex`` matches all of ``name`` (the reference's rule: ``$`` appended, ``re.match``)."""
    return re.match(regex if regex.endswith("$") else regex + "$", name) is not None


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


def _default_session(caller: str):
    sess = tfv1.get_default_session()
    if sess is None:
        raise RuntimeError(f"{caller}() needs a default session (`with sess.as_default():`)")
    return sess


def get_global_step_value() -> int:
    """The value of ``global_step`` in the default session."""
    return int(_default_session("get_global_step_value").run(get_global_step_var()))


def gpu_available_in_session() -> bool:
    """Whether the default session has a GPU device."""
    devices = _default_session("gpu_available_in_session").list_devices()
    return any(d.device_type.upper() == "GPU" for d in devices)


def get_tf_version_tuple() -> tuple[int, int]:
    """TensorFlow's ``(major, minor)`` version."""
    major, minor = tf.__version__.split(".")[:2]
    return int(major), int(minor)


def get_default_sess_config(mem_fraction: float = 0.99) -> tfv1.ConfigProto:
    """The reference's default session config: soft placement, one intra-op thread (the towers
    run in parallel instead), as many inter-op threads as TensorFlow picks, and GPU memory taken
    on demand up to ``mem_fraction`` of each GPU."""
    config = tfv1.ConfigProto(
        allow_soft_placement=True, intra_op_parallelism_threads=1, inter_op_parallelism_threads=0
    )
    config.gpu_options.per_process_gpu_memory_fraction = mem_fraction
    config.gpu_options.allow_growth = True
    return config
