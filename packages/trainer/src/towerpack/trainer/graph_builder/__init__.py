"""Helpers for building data-parallel graphs: towers, device placement, gradient reduction, and
the builders the multi-device trainers are made of (to write custom trainers from)."""

from .asynchronous import AsyncMultiGPUBuilder
from .data_parallel import DataParallelBuilder
from .parameter_server import PSDevice, SyncMultiGPUParameterServerBuilder
from .replicated import SyncMultiGPUReplicatedBuilder
from .utils import (
    AllReduceMode,
    LeastLoadedDeviceSetter,
    aggregate_grads,
    allreduce_grads,
    merge_grad_list,
    override_to_local_variable,
    split_grad_list,
)

__all__ = [
    "AllReduceMode",
    "AsyncMultiGPUBuilder",
    "DataParallelBuilder",
    "LeastLoadedDeviceSetter",
    "PSDevice",
    "SyncMultiGPUParameterServerBuilder",
    "SyncMultiGPUReplicatedBuilder",
    "aggregate_grads",
    "allreduce_grads",
    "merge_grad_list",
    "override_to_local_variable",
    "split_grad_list",
]
