"""How many GPUs this process can use, and ``change_gpu`` to pick them.

``get_num_gpu`` never imports TensorFlow. In a process that has imported it (a trainer), the
answer is TensorFlow's: the GPUs it can place ops on. Elsewhere (the launcher, data workers, a
script before it imports TensorFlow) it counts the GPUs the driver reports, through NVML or else
``nvidia-smi -L``, and keeps those ``CUDA_VISIBLE_DEVICES`` leaves visible, read as CUDA reads it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from collections.abc import Iterator

from .nvml import NVMLContext, NvmlException
from .utils import change_env

__all__ = ["change_gpu", "get_nr_gpu", "get_num_gpu"]

_log = logging.getLogger(__name__)

VISIBLE_VAR = "CUDA_VISIBLE_DEVICES"


def change_gpu(val: int | str) -> contextlib.AbstractContextManager[None]:
    """A context in which ``CUDA_VISIBLE_DEVICES`` is ``val`` (``-1``: no GPU); restored afterwards."""
    value = str(val).strip()
    return change_env(VISIBLE_VAR, "" if value == "-1" else value)


def get_num_gpu() -> int:
    """The number of GPUs this process can use (see the module docstring for where it looks)."""
    tf = sys.modules.get("tensorflow")
    if tf is not None:
        return len(tf.config.list_physical_devices("GPU"))
    physical = _nvml_count()
    if physical is None:
        physical = _nvidia_smi_count()
    if not physical:
        return 0
    return visible_gpu_count(os.environ.get(VISIBLE_VAR), physical)


#: The reference's older name.
get_nr_gpu = get_num_gpu


def visible_gpu_count(visible: str | None, physical: int) -> int:
    """How many of ``physical`` GPUs a ``CUDA_VISIBLE_DEVICES`` value leaves visible.

    As CUDA reads it: unset means all; the list is read up to its first entry that is not a GPU
    (``-1``, an index out of range, a repeat), so ``''`` and ``'-1'`` hide every GPU. Entries
    may be indices or ``GPU-``/``MIG-`` UUIDs.
    """
    if visible is None:
        return physical
    return sum(1 for _ in _valid_entries(visible, physical))


def _valid_entries(visible: str, physical: int) -> Iterator[str]:
    seen: set[str] = set()
    for entry in (e.strip() for e in visible.split(",")):
        if entry.isdigit():
            entry = str(int(entry))
            valid = int(entry) < physical
        else:
            valid = entry.startswith(("GPU-", "MIG-"))
        if not valid or entry in seen:
            return
        seen.add(entry)
        yield entry


def _nvml_count() -> int | None:
    try:
        with NVMLContext() as ctx:
            return ctx.num_devices()
    except (NvmlException, ImportError) as e:
        _log.debug("NVML cannot count GPUs: %s", e)
        return None


def _nvidia_smi_count() -> int | None:
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        _log.debug("nvidia-smi -L cannot count GPUs: %s", e)
        return None
    return sum(1 for line in done.stdout.splitlines() if line.startswith("GPU "))
