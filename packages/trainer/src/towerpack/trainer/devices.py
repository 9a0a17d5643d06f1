"""Which devices the towers of a multi-device trainer run on.

``gpus`` (a count, a list of GPU ids, or device names) becomes one device name per tower. On a
machine without GPUs a count or id list falls back to logical CPU devices (``/cpu:0`` ..
``/cpu:N-1``, made by the session's ``device_count``), so the same script runs on a laptop.
Trainers with one device per process pin the GPU of their local rank.
"""

from __future__ import annotations

import copy
import os

from towerpack.utils.gpu import get_num_gpu  # the GPUs TensorFlow can use, once it is imported

from . import logger
from .compat import tf, tfv1
from .sesscreate import NewSessionCreator, default_session_config

__all__ = [
    "copy_config",
    "ensure_cpu_devices",
    "get_num_gpu",
    "local_gpu_index",
    "num_cpu_devices",
    "resolve_devices",
    "with_visible_gpu",
]


def resolve_devices(gpus) -> list[str]:
    """One device name per tower.

    Args:
        gpus: an int N (GPUs 0..N-1), a list of GPU ids (relative to CUDA_VISIBLE_DEVICES), or a
            list of device names such as ``["/cpu:0", "/cpu:1"]``. Without any visible GPU, ids
            and counts map to that many logical CPU devices.
    """
    if isinstance(gpus, bool) or not isinstance(gpus, (int, list, tuple, range)):
        raise TypeError(f"gpus must be a count, a list of GPU ids or a list of device names, got {gpus!r}")
    if isinstance(gpus, int):
        if gpus < 1:
            raise ValueError(f"gpus must be at least 1, got {gpus}")
        gpus = list(range(gpus))
    gpus = list(gpus)
    if not gpus:
        raise ValueError("gpus is empty: give at least one device")
    if all(isinstance(g, str) for g in gpus):
        devices = [tf.DeviceSpec.from_string(g) for g in gpus]
        bad = [g for g, d in zip(gpus, devices, strict=True) if d.device_type not in ("CPU", "GPU")]
        if bad:
            raise ValueError(f"device names must look like '/gpu:0' or '/cpu:1', got {bad}")
        names = [f"/{d.device_type.lower()}:{d.device_index or 0}" for d in devices]
        _check_unique(names)
        return names
    if not all(isinstance(g, int) and not isinstance(g, bool) for g in gpus):
        raise TypeError(f"gpus mixes GPU ids and other values: {gpus!r}")
    _check_unique(gpus)
    if min(gpus) < 0:
        raise ValueError(f"GPU ids cannot be negative: {gpus}")
    visible = len(tf.config.list_physical_devices("GPU"))
    if visible == 0:
        if len(gpus) == 1:
            logger.info("No GPU is visible: the tower runs on the CPU")
        else:
            logger.warning(
                "No GPU is visible: the %d towers run on logical CPU devices /cpu:0../cpu:%d",
                len(gpus),
                len(gpus) - 1,
            )
        return [f"/cpu:{k}" for k in range(len(gpus))]
    missing = [g for g in gpus if g >= visible]
    if missing:
        cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
        where = f" (CUDA_VISIBLE_DEVICES={cvd})" if cvd is not None else ""
        raise ValueError(f"GPU id(s) {missing} asked for, but only {visible} GPU(s) are visible{where}")
    return [f"/gpu:{g}" for g in gpus]


def _check_unique(items) -> None:
    dup = sorted({str(x) for x in items if list(items).count(x) > 1})
    if dup:
        raise ValueError(f"each tower needs its own device; repeated: {dup}")


def num_cpu_devices(devices) -> int:
    """How many CPU devices the session must have for these device names (0 if none is a CPU)."""
    indices = [tf.DeviceSpec.from_string(d).device_index or 0 for d in devices if d.startswith("/cpu")]
    return max(indices) + 1 if indices else 0


def ensure_cpu_devices(session_creator, count: int):
    """The session creator to use so that the session has at least ``count`` CPU devices.

    A ``NewSessionCreator`` comes back as a copy whose config (itself a copy: the user's is left
    as it is) has enough; another creator is the user's business, which the log says.
    """
    if count <= 1:
        return session_creator
    if isinstance(session_creator, NewSessionCreator):
        config = copy_config(session_creator.config)
        config.device_count["CPU"] = max(config.device_count.get("CPU", 1), count)
        session_creator = copy.copy(session_creator)
        session_creator.config = config
        return session_creator
    logger.warning(
        "The towers use %d CPU devices; the custom session creator must create them "
        "(ConfigProto(device_count={'CPU': %d}))",
        count,
        count,
    )
    return session_creator


def copy_config(config: tfv1.ConfigProto | None) -> tfv1.ConfigProto:
    """A copy of a session config (a new default one for None), to change without touching the user's."""
    if config is None:
        return default_session_config()
    out = tfv1.ConfigProto()
    out.CopyFrom(config)
    return out


def local_gpu_index(num_gpus: int, local_rank: int | None) -> int | None:
    """The GPU (among the visible ones) a one-device-per-process trainer pins: the local rank's
    when several are visible, the only one when one is, none without GPUs or a local rank."""
    if num_gpus == 0:
        return None
    if num_gpus == 1:
        return 0
    return None if local_rank is None else local_rank % num_gpus


def with_visible_gpu(config: tfv1.ConfigProto | None, index: int | None) -> tfv1.ConfigProto:
    """A copy of ``config`` whose GPU list is only GPU ``index``; a list the user already set wins."""
    config = copy_config(config)
    if index is not None and not config.gpu_options.visible_device_list:
        config.gpu_options.visible_device_list = str(index)
    return config
