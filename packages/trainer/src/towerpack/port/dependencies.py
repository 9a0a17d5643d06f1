"""The packages the reference installed with itself that towerpack does not, where a ported file
imports one that is not installed here.

tensorpack 0.11 required six, termcolor, tabulate and msgpack-numpy, so a project could import them
without asking for them (the reference's FasterRCNN prints its tables with tabulate). towerpack
needs none of them; a ported project that imports one must install it itself.
"""

from __future__ import annotations

import ast
import importlib.util

from .findings import Finding, Kind

# Module -> the distribution that provides it (what to pip install).
REFERENCE_DEPENDENCIES = {
    "six": "six",
    "termcolor": "termcolor",
    "tabulate": "tabulate",
    "msgpack_numpy": "msgpack-numpy",
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_dependencies(code: str, path: str) -> list[Finding]:
    """One finding per import of such a package that is not installed."""
    if not any(name in code for name in REFERENCE_DEPENDENCIES):
        return []
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            modules = [node.module]
        else:
            continue
        for module in modules:
            root = module.partition(".")[0]
            if root in REFERENCE_DEPENDENCIES and not _installed(root):
                found.append(
                    Finding(
                        path,
                        node.lineno,
                        Kind.MISSING_DEPENDENCY,
                        f"`{root}` is not installed: tensorpack installed it as a dependency of its own, "
                        f"towerpack does not (pip install {REFERENCE_DEPENDENCIES[root]})",
                    )
                )
    return found
