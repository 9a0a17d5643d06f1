"""Synchronous data-parallel training with one replica of the variables per device.

Tower 0 keeps the variables under their plain names (so checkpoints match a single-tower
model); tower k holds local copies named ``tower{k}/<name>``. Gradients are all-reduced, then
one ``apply_gradients`` updates every replica on its own device, so optimizer state that is not
per variable (Adam's beta powers) advances once per step.
"""

from __future__ import annotations

import contextlib
import re

from .. import logger
from ..compat import tf, tfv1
from .data_parallel import DataParallelBuilder, build_towers, check_same_variables
from .utils import AllReduceMode, allreduce_grads, merge_grad_list, split_grad_list

__all__ = ["SyncMultiGPUReplicatedBuilder"]

_REPLICA = re.compile(r"^tower(\d+)/(.+)$")


def default_allreduce_mode(devices) -> AllReduceMode:
    """NCCL between GPUs, a host reduction between CPU devices."""
    names = [d for d in devices if isinstance(d, str)]
    return AllReduceMode.NCCL if names and all("gpu" in d.lower() for d in names) else AllReduceMode.CPU


class SyncMultiGPUReplicatedBuilder(DataParallelBuilder):
    """Builds replicated towers, the all-reduce and the update.

    Args:
        towers, devices: as in ``DataParallelBuilder``.
        average: average the gradients over the towers (sum them otherwise).
        mode: an ``AllReduceMode`` or its value, ``"nccl"``, ``"collective"`` or ``"cpu"`` (see
            ``allreduce_grads``); default NCCL on GPUs and ``"cpu"`` otherwise.
    """

    def __init__(self, towers, average: bool = True, mode: AllReduceMode | str | None = None, devices=None):
        super().__init__(towers, devices)
        self.average = average
        self.mode = (
            default_allreduce_mode(self.devices)
            if mode is None
            else AllReduceMode.parse(mode, "all-reduce mode")
        )

    def call_for_each_tower(self, tower_fn):
        """Build ``tower_fn`` (returning ``(grad, var)`` pairs) in every tower; returns the K lists."""
        vs_names = [""] + [f"tower{k}" for k in range(1, len(self.towers))]
        return build_towers(self.towers, tower_fn, self.devices, vs_names, local_replicas=True)

    def build(self, grad_list, get_opt_fn):
        """All-reduce the towers' gradients and update every replica.

        Returns:
            ``(train_op, post_init_op)``: the step, and the op that copies tower 0's variables to
            the other replicas (run it after initialization or restore).
        """
        check_same_variables(grad_list, replicated=True)
        all_grads, all_vars = split_grad_list(grad_list)
        reduced = allreduce_grads(all_grads, average=self.average, mode=self.mode)
        pairs = [p for tower in merge_grad_list(reduced, all_vars) for p in tower]
        opt = get_opt_fn()
        # Outside any name scope, so the optimizer's own variables keep a single-tower model's names.
        with _replica_slots_are_local():
            train_op = opt.apply_gradients(pairs, name="train_op")
        return train_op, self.get_post_init_ops()

    @staticmethod
    def get_post_init_ops():
        """An op that copies every variable of tower 0 to its ``tower{k}/`` replicas."""
        everything = tfv1.global_variables() + tfv1.local_variables()
        by_name = {v.op.name: v for v in everything}
        assigns = []
        for v in everything:
            m = _REPLICA.match(v.op.name)
            if not m or int(m.group(1)) == 0:
                continue
            src = by_name.get(m.group(2))
            if src is None:
                logger.debug("replica %s has no tower-0 variable %s; not synced", v.op.name, m.group(2))
                continue
            with tf.device(v.device):
                assigns.append(v.assign(src.read_value()))
        return tf.group(*assigns, name="sync_variables_from_main_tower")


@contextlib.contextmanager
def _replica_slots_are_local():
    """Optimizer slots of tower k>0 variables (``tower{k}/...``) become local variables."""

    def getter(getter, name, *args, **kwargs):
        m = _REPLICA.match(name)
        if m and int(m.group(1)) > 0:
            collections = set(kwargs.pop("collections", None) or [tfv1.GraphKeys.GLOBAL_VARIABLES])
            collections.discard(tfv1.GraphKeys.GLOBAL_VARIABLES)
            collections.add(tfv1.GraphKeys.LOCAL_VARIABLES)
            kwargs["collections"] = sorted(collections)
        return getter(name, *args, **kwargs)

    with tfv1.variable_scope(tfv1.get_variable_scope(), custom_getter=getter, auxiliary_name_scope=False):
        yield
