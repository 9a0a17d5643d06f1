"""Helpers for building data-parallel graphs (device placement, gradient reduction)."""

from .utils import (
    LeastLoadedDeviceSetter,
    aggregate_grads,
    allreduce_grads,
    merge_grad_list,
    override_to_local_variable,
    split_grad_list,
)

__all__ = [
    "LeastLoadedDeviceSetter",
    "aggregate_grads",
    "allreduce_grads",
    "merge_grad_list",
    "override_to_local_variable",
    "split_grad_list",
]
