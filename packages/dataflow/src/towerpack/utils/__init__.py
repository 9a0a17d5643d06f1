"""towerpack.utils: the reference's ``tensorpack.utils``, without TensorFlow.

Small tools that training scripts, dataflows and the launcher share: the logger and its log
directory, progress bars, random generators, file and download helpers, statistics counters,
image grids and drawing, decorators, GPU counting, threads and processes, timers, serialization.
The module names are the reference's (``towerpack.utils.viz``, ``towerpack.utils.fs``, ...).

``from towerpack.utils import *`` gives the reference's seven names. Everything here loads on
first use, so importing one submodule (as the dataflow does) neither runs the others nor
installs the logger's handler: that happens when ``towerpack.utils.logger`` is imported.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "change_env",
    "execute_only_once",
    "fix_rng_seed",
    "get_rng",
    "get_tqdm",
    "humanize_time_delta",
    "logger",
]

_SUBMODULES = frozenset(
    {
        "argtools",
        "compatible_serialize",
        "concurrency",
        "debug",
        "develop",
        "fs",
        "gpu",
        "loadcaffe",
        "logger",
        "naming",
        "nvml",
        "palette",
        "progress",
        "serialize",
        "stats",
        "timer",
        "utils",
        "viz",
    }
)


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in __all__:
        return getattr(importlib.import_module(".utils", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _SUBMODULES | set(__all__))
