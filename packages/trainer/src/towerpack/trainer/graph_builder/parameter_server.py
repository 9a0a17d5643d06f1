"""Synchronous data-parallel training with one shared copy of the variables.

The variables live on the CPU (``ps_device="cpu"``) or spread over the towers' devices by
size (``ps_device="gpu"``, with ``LeastLoadedDeviceSetter``); every tower reads them, the
gradients are summed next to each variable and averaged, and one update is applied.
"""

from __future__ import annotations

from ..choice import Choice
from .data_parallel import DataParallelBuilder, build_towers, check_same_variables
from .utils import LeastLoadedDeviceSetter, aggregate_grads

__all__ = ["PSDevice", "SyncMultiGPUParameterServerBuilder"]


class PSDevice(Choice):
    """Where the shared variables live (``ps_device=``)."""

    CPU = "cpu"  # all on /cpu:0
    GPU = "gpu"  # spread over the towers' devices by size


class SyncMultiGPUParameterServerBuilder(DataParallelBuilder):
    """Builds shared-variable towers, the gradient average and the update.

    Args:
        towers, devices: as in ``DataParallelBuilder``.
        ps_device: a ``PSDevice`` or its value: ``"cpu"`` (variables on ``/cpu:0``) or ``"gpu"``
            (variables spread over the towers' devices).
        average: average the gradients over the towers (sum them otherwise).
    """

    def __init__(self, towers, ps_device: PSDevice | str = PSDevice.GPU, devices=None, average: bool = True):
        super().__init__(towers, devices)
        self.ps_device = PSDevice.parse(ps_device, "ps_device")
        self.average = average

    def placement(self) -> list:
        """One device function per tower: variables on the parameter device(s), the rest local."""
        ps = ["/cpu:0"] if self.ps_device is PSDevice.CPU else list(self.devices)
        return [LeastLoadedDeviceSetter(d, ps) for d in self.devices]

    def call_for_each_tower(self, tower_fn):
        """Build ``tower_fn`` (returning ``(grad, var)`` pairs) in every tower; returns the K lists."""
        return build_towers(self.towers, tower_fn, self.placement())

    def build(self, grad_list, get_opt_fn):
        """Average the towers' gradients next to each variable and apply them once; returns the op."""
        check_same_variables(grad_list, replicated=False)
        grads = aggregate_grads(grad_list, colocation=True, average=self.average)
        return get_opt_fn().apply_gradients(grads, name="train_op")
