"""Graph lookups every part of the trainer shares: tensors and ops by name, the global step; the
default session config and a description of the environment for bug reports.

Names follow the reference: ``"x"`` is an op (or its first output when a tensor is asked for),
``"x:0"`` is a tensor.
"""

from __future__ import annotations

import os
import platform
import re
import sys

import numpy as np

from towerpack.dataflow.placement import PlacementError, placement

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


def _versions() -> list[tuple[str, str]]:
    from importlib import metadata

    rows = []
    for dist in ("towerpack-trainer", "towerpack-dataflow", "towerpack-launcher", "horovod", "tf-keras"):
        try:
            rows.append((dist, metadata.version(dist)))
        except metadata.PackageNotFoundError:
            rows.append((dist, "not installed"))
    return rows


def _placement() -> str:
    try:
        p = placement()
    except PlacementError as e:
        return f"invalid: {e}"
    where = f"rank {p.rank} of {p.world_size}, local {p.local_rank} of {p.local_size}, node {p.node_rank}"
    return f"{where} (from {p.launcher.value})"


def collect_env_info() -> str:
    """A two-column table of what matters in a bug report: Python, numpy and TensorFlow
    versions and paths, TensorFlow's CUDA build, the visible GPUs, towerpack's and Horovod's
    versions, this process's place in its job, and the environment variables that change device
    placement."""
    build = tf.sysconfig.get_build_info()
    rows = [
        ("sys.platform", sys.platform),
        ("Python", sys.version.replace("\n", " ")),
        ("platform", platform.platform()),
        ("numpy", np.__version__),
        ("TensorFlow", f"{tf.__version__} ({tf.version.GIT_VERSION}) @{os.path.dirname(tf.__file__)}"),
        ("TF built with CUDA", str(tf.test.is_built_with_cuda())),
        ("TF CUDA / cuDNN", f"{build.get('cuda_version', '-')} / {build.get('cudnn_version', '-')}"),
        ("GPUs", ", ".join(d.name for d in tf.config.list_physical_devices("GPU")) or "none"),
        ("CPUs", str(os.cpu_count())),
        *_versions(),
        ("placement", _placement()),
    ]
    for var in ("CUDA_VISIBLE_DEVICES", "TF_CONFIG", "RANK", "WORLD_SIZE", "OMP_NUM_THREADS"):
        rows.append((var, os.environ.get(var, "(unset)")))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)
