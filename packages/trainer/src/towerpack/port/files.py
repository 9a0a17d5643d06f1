"""The Python files ``towerpack port`` works on: the files named, and the ``*.py`` files under the
directories named, leaving out hidden directories, virtual environments and caches."""

from __future__ import annotations

import os
from pathlib import Path

SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "venv", "dist"})


def _skipped(directory: Path) -> bool:
    name = directory.name
    return name.startswith(".") or name in SKIPPED_DIRS or (directory / "pyvenv.cfg").exists()


def python_files(paths: list[str]) -> tuple[list[Path], list[str]]:
    """The files to port (each directory's in sorted order) and the paths that do not exist."""
    found: list[Path] = []
    missing: list[str] = []
    for given in paths:
        path = Path(given)
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            walked = []
            for root, dirs, files in os.walk(path):
                dirs[:] = [d for d in dirs if not _skipped(Path(root) / d)]
                walked.extend(Path(root) / f for f in files if f.endswith(".py"))
            found.extend(sorted(walked))
        else:
            missing.append(given)
    return list(dict.fromkeys(found)), missing
