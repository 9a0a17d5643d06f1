"""Building one function once per tower, each on its own device."""

from __future__ import annotations

import tensorflow as tf

from ..tower import TrainTowerContext
from . import cross_tower
from .utils import override_to_local_variable

tfv1 = tf.compat.v1

__all__ = ["DataParallelBuilder", "build_towers", "check_same_variables"]


class DataParallelBuilder:
    """Base of the data-parallel builders.

    Args:
        towers: tower ids (GPU ids by default; tower k is named ``tower{k}`` by position).
        devices: one device (name or device function) per tower; default ``/gpu:{id}``.
    """

    def __init__(self, towers, devices=None):
        towers = list(towers)
        if not towers:
            raise ValueError("DataParallelBuilder needs at least one tower")
        self.towers = towers
        self.devices = list(devices) if devices is not None else [f"/gpu:{t}" for t in towers]
        if len(self.devices) != len(towers):
            raise ValueError(f"{len(towers)} towers but {len(self.devices)} devices")

    @staticmethod
    def call_for_each_tower(towers, func, devices=None, use_vs=None):
        """Call ``func()`` once per tower under a ``TrainTowerContext`` and the tower's device.

        Args:
            towers: list of tower ids; tower k is named ``tower{k}`` by position.
            func: builds one tower and returns its result.
            devices: one device string (or device function) per tower (default ``/gpu:{id}``).
            use_vs: one bool per tower: whether the tower gets its own variable scope ``tower{k}``.

        Returns:
            the list of ``func()`` results, in tower order.
        """
        towers = list(towers)
        use_vs = list(use_vs) if use_vs is not None else [False] * len(towers)
        if len(use_vs) != len(towers):
            raise ValueError(f"towers and use_vs differ in length: {len(towers)}, {len(use_vs)}")
        vs_names = [f"tower{k}" if own else "" for k, own in enumerate(use_vs)]
        return build_towers(towers, func, devices, vs_names)


def build_towers(towers, func, devices=None, vs_names=None, local_replicas: bool = False):
    """Call ``func()`` in tower ``k`` (name scope ``tower{k}``) on ``devices[k]`` in variable scope
    ``vs_names[k]`` ('' shares the variables of tower 0). With ``local_replicas`` the variables
    that towers after the first create are local variables (not saved, not in global_variables)."""
    towers = list(towers)
    devices = list(devices) if devices is not None else [f"/gpu:{t}" for t in towers]
    vs_names = list(vs_names) if vs_names is not None else [""] * len(towers)
    if not len(devices) == len(vs_names) == len(towers):
        raise ValueError(
            f"towers, devices and vs_names differ in length: {len(towers)}, {len(devices)}, {len(vs_names)}"
        )
    results = []
    for k, (device, vs_name) in enumerate(zip(devices, vs_names, strict=True)):
        name = f"tower{k}"
        with (
            override_to_local_variable(enable=local_replicas and k > 0),
            tfv1.device(device),
            TrainTowerContext(name, vs_name=vs_name, index=k, total=len(towers)),
        ):
            results.append(func())
    cross_tower.check_complete(len(towers))
    return results


def check_same_variables(grad_lists, replicated: bool) -> None:
    """Raise if the towers' ``(grad, var)`` lists do not line up variable by variable.

    Replicated towers hold ``tower{k}/<name>`` copies of tower 0's ``<name>``; shared towers hold
    the very same variables.
    """
    first = [v.op.name for _, v in grad_lists[0]]
    for k, grads in enumerate(grad_lists[1:], start=1):
        names = [v.op.name for _, v in grads]
        if replicated:
            prefix = f"tower{k}/"
            names = [n[len(prefix) :] if n.startswith(prefix) else n for n in names]
        if names != first:
            raise ValueError(
                f"tower {k} computed gradients for different variables than tower 0: "
                f"{names} vs {first}. Towers must build the same model."
            )
