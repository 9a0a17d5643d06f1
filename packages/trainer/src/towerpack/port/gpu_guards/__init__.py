"""GPU-only guards: what stops a tensorpack project on a machine without GPUs (an ``assert`` on a GPU
query, an ``assert`` or ``raise`` in a branch taken without GPUs, a cap of the towers at the GPU count,
a division by the GPU count), reported with the edit that lets the run go on, and applied on request
(``towerpack port --fix-gpu-guards``). guards.py says how each is found and fixed."""

from __future__ import annotations

import libcst as cst

from ..findings import Finding, Kind
from .edits import apply
from .guards import Guard, Stop, find

__all__ = ["Guard", "Stop", "find", "fixed_for_cpu", "gpu_guards"]

# A fix can make another guard reachable (a branch on the count, once the count is 1); a few rounds
# reach the point where the report finds nothing.
_ROUNDS = 5


def gpu_guards(source: str, path: str) -> list[Finding]:
    return [Finding(path, g.line, Kind.GPU_ONLY, g.message) for g in find(source)]


def fixed_for_cpu(module: cst.Module) -> tuple[cst.Module, list[str]]:
    """``module`` with every guard's fix applied, and the fixes in words (without line numbers, which
    the fixes change)."""
    done: list[str] = []
    for _ in range(_ROUNDS):
        fixes = {fix for guard in find(module.code) for fix in guard.fixes}
        fixed = apply(module, fixes)
        if fixed.code == module.code:
            break
        done += sorted({fix.short for fix in fixes})
        module = fixed
    return module, done
