"""The calls that ask for GPUs, and what each answers on a machine without any."""

from __future__ import annotations

import ast

# The last attribute of the call, and its answer without GPUs.
ANSWERS: dict[str, object] = {
    "is_gpu_available": False,
    "is_built_with_cuda": False,
    "is_built_with_gpu_support": False,
    "gpu_device_name": "",
    "get_num_gpu": 0,
    "get_nr_gpu": 0,
    "list_physical_devices": [],
    "list_logical_devices": [],
}


def query(node: ast.AST) -> str | None:
    """The name of the GPU query ``node`` calls (``list_*_devices`` only for ``"GPU"``), or None."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in ANSWERS:
        return None
    if name.startswith("list_"):
        given = [*node.args, *(k.value for k in node.keywords if k.arg == "device_type")]
        if not any(isinstance(a, ast.Constant) and a.value == "GPU" for a in given):
            return None
    return name


def asks_for_gpus(node: ast.AST) -> bool:
    """Whether a GPU query is called anywhere in ``node`` (lambdas and comprehensions included)."""
    return any(query(sub) is not None for sub in ast.walk(node))
