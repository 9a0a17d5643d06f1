"""The environment of a training process, for bug reports: ``collect_env_info()`` gives a table
of versions, builds, devices and placement variables; ``python -m towerpack.trainer.collect_env``
prints it and then the GPUs TensorFlow sees, with their details (``__main__.py``: a package, so
that running it does not re-execute a module the trainer has imported already).
"""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata

import numpy as np
import psutil

from towerpack.utils.placement import PlacementError, placement

from ..compat import tf
from ..model_utils import format_table

__all__ = ["collect_env_info", "tensorflow_gpus"]

_DISTRIBUTIONS = (
    "towerpack-trainer",
    "towerpack-dataflow",
    "towerpack-launcher",
    "horovod",
    "tf-keras",
    "opencv-python-headless",
)
_VARIABLES = ("CUDA_VISIBLE_DEVICES", "TF_CONFIG", "RANK", "WORLD_SIZE", "OMP_NUM_THREADS")


def _versions() -> list[tuple[str, str]]:
    rows = []
    for dist in _DISTRIBUTIONS:
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


def _nvml_gpus() -> str:
    """What the NVIDIA driver lists (also GPUs that CUDA_VISIBLE_DEVICES hides from TensorFlow)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as e:  # no binding, no driver, no GPU: each is an answer here
        return f"unavailable ({e or type(e).__name__})"
    try:
        names = [
            pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            for i in range(pynvml.nvmlDeviceGetCount())
        ]
        return f"driver {pynvml.nvmlSystemGetDriverVersion()}: " + (", ".join(names) or "no GPU")
    finally:
        pynvml.nvmlShutdown()


def collect_env_info() -> str:
    """A two-column table of what matters in a bug report: Python, numpy and TensorFlow
    versions and paths, TensorFlow's CUDA build, the GPUs TensorFlow and the driver see, CPUs and
    memory, towerpack's, Horovod's and OpenCV's versions, this process's place in its job, and the
    environment variables that change device placement."""
    build = tf.sysconfig.get_build_info()
    memory = psutil.virtual_memory()
    rows = [
        ("sys.platform", sys.platform),
        ("Python", sys.version.replace("\n", " ")),
        ("platform", platform.platform()),
        ("numpy", np.__version__),
        ("TensorFlow", f"{tf.__version__} ({tf.version.GIT_VERSION}) @{os.path.dirname(tf.__file__)}"),
        ("TF built with CUDA", str(tf.test.is_built_with_cuda())),
        ("TF CUDA / cuDNN", f"{build.get('cuda_version', '-')} / {build.get('cudnn_version', '-')}"),
        ("GPUs", ", ".join(d.name for d in tf.config.list_physical_devices("GPU")) or "none"),
        ("NVML", _nvml_gpus()),
        ("CPUs", str(os.cpu_count())),
        ("RAM", f"{memory.available / 1024**3:.1f} GB free of {memory.total / 1024**3:.1f} GB"),
        *_versions(),
        ("placement", _placement()),
    ]
    for var in _VARIABLES:
        value = os.environ.get(var)
        rows.append((var, "(unset)" if value is None else value or "(empty)"))
    return format_table(rows)


def tensorflow_gpus() -> str:
    """The GPUs TensorFlow sees, one line each with its name and compute capability."""
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return "TensorFlow sees no GPU"
    lines = [f"TensorFlow sees {len(gpus)} GPU(s):"]
    for gpu in gpus:
        details = tf.config.experimental.get_device_details(gpu)
        capability = ".".join(map(str, details.get("compute_capability", ()))) or "?"
        lines.append(f"  {gpu.name}: {details.get('device_name', '?')}, compute capability {capability}")
    return "\n".join(lines)
