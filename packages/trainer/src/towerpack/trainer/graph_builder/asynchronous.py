"""Asynchronous data-parallel training: every tower updates the shared variables with its own
gradients, without waiting for the others' gradients."""

from __future__ import annotations

from ..compat import tf
from .data_parallel import DataParallelBuilder, build_towers, check_same_variables
from .utils import LeastLoadedDeviceSetter

__all__ = ["AsyncMultiGPUBuilder"]


class AsyncMultiGPUBuilder(DataParallelBuilder):
    """Builds shared-variable towers (variables spread over the devices) and one update per tower.

    Each tower's update runs as soon as its gradients are ready; the updates of one variable are
    applied one after the other (none is lost), while a tower may read variables that other
    towers have already updated in the same step.

    Args:
        towers, devices: as in ``DataParallelBuilder``.
        scale_gradient: multiply each tower's gradients by 1/K (K towers).
    """

    def __init__(self, towers, scale_gradient: bool = True, devices=None):
        super().__init__(towers, devices)
        self.scale_gradient = scale_gradient

    def call_for_each_tower(self, tower_fn):
        """Build ``tower_fn`` (returning ``(grad, var)`` pairs) in every tower; returns the K lists."""
        placement = [LeastLoadedDeviceSetter(d, self.devices) for d in self.devices]
        return build_towers(self.towers, tower_fn, placement)

    def build(self, grad_list, get_opt_fn):
        """One ``apply_gradients`` per tower, each after the previous one; returns the grouped op."""
        check_same_variables(grad_list, replicated=False)
        opt = get_opt_fn()
        num = len(grad_list)
        applies = []
        for k, grads in enumerate(grad_list):
            if self.scale_gradient and num > 1:
                grads = [(_scale(g, 1.0 / num), v) for g, v in grads]
            with tf.control_dependencies(applies[-1:]):
                applies.append(opt.apply_gradients(grads, name=f"apply_grad_{k}"))
        return tf.group(*applies, name="train_op")


def _scale(grad, factor: float):
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values * factor, grad.indices, grad.dense_shape)
    return grad * factor
