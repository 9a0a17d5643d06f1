"""Building blocks for data-parallel graphs: device placement and gradient reduction across towers.

Gradient lists follow one convention: ``all_grads[k][i]`` is tower k's entry for variable i
(K towers, N variables), either a gradient tensor or a ``(gradient, variable)`` pair.
"""

from __future__ import annotations

import contextlib
import itertools
import logging

import tensorflow as tf
from tensorflow.python.ops import collective_ops, nccl_ops

from ..choice import Choice
from ..compat import tfv1

__all__ = [
    "AllReduceMode",
    "LeastLoadedDeviceSetter",
    "aggregate_grads",
    "allreduce_grads",
    "merge_grad_list",
    "override_to_local_variable",
    "split_grad_list",
]

logger = logging.getLogger(__name__)


class AllReduceMode(Choice):
    """How ``allreduce_grads`` sums the towers' gradients."""

    NCCL = "nccl"  # NCCL all-sum, GPU tensors only
    COLLECTIVE = "collective"  # TensorFlow collective ops, any device type
    CPU = "cpu"  # sum on the host, copied back to each device


# Op types that hold variable storage; LeastLoadedDeviceSetter puts these on parameter devices.
_VARIABLE_OPS = frozenset({"Variable", "VariableV2", "VarHandleOp", "AutoReloadVariable"})

# Collective ops are matched across devices by (group_key, instance_key); keys must be unique
# per group and per reduction in a process.
_collective_keys = itertools.count(1000)


def next_collective_key() -> int:
    """A group or instance key for collective ops not used before in this process."""
    return next(_collective_keys)


def split_grad_list(grad_list):
    """KxN list of (grad, var) pairs -> (KxN grads, KxN vars)."""
    grads = [[g for g, _ in tower] for tower in grad_list]
    variables = [[v for _, v in tower] for tower in grad_list]
    return grads, variables


def merge_grad_list(all_grads, all_vars):
    """Inverse of :func:`split_grad_list`."""
    return [list(zip(g, v, strict=True)) for g, v in zip(all_grads, all_vars, strict=True)]


def _check_rectangular(all_grads) -> tuple[int, int]:
    if not all_grads:
        raise ValueError("empty gradient list: expected one list of gradients per tower")
    sizes = {len(tower) for tower in all_grads}
    if len(sizes) != 1:
        raise ValueError(f"every tower must have the same number of gradients, got {sorted(sizes)}")
    return len(all_grads), sizes.pop()


def _dense(grad):
    if isinstance(grad, tf.IndexedSlices):
        return tf.convert_to_tensor(grad)
    return grad


def _mean(total, count: int):
    return tf.math.truediv(total, tf.cast(count, total.dtype)) if total.dtype.is_floating else total // count


def allreduce_grads(all_grads, average: bool = True, mode: AllReduceMode | str = AllReduceMode.COLLECTIVE):
    """All-reduce KxN gradient tensors: every tower receives the sum (or mean) over the towers.

    Args:
        all_grads: ``all_grads[k][i]`` is tower k's gradient of variable i; tower k's tensors live on
            tower k's device.
        average: divide the sum by the number of towers.
        mode: an ``AllReduceMode`` or its value: ``"nccl"`` (NCCL all-sum, GPU tensors only),
            ``"collective"`` (TensorFlow collective ops, any device type) or ``"cpu"`` (sum on the
            host, copied back to each device).

    Returns:
        KxN reduced tensors, tower k's on tower k's device.
    """
    mode = AllReduceMode.parse(mode, "all-reduce mode")
    num_towers, num_vars = _check_rectangular(all_grads)
    if num_towers == 1:
        return [list(all_grads[0])]
    reduced = [[None] * num_vars for _ in range(num_towers)]
    group_key = next_collective_key()
    with tfv1.name_scope("AllReduce"):
        for i in range(num_vars):
            grads = [_dense(all_grads[k][i]) for k in range(num_towers)]
            if mode is AllReduceMode.NCCL:
                not_gpu = [g.device for g in grads if "GPU" not in g.device.upper()]
                if not_gpu:
                    raise ValueError(f"mode='nccl' needs every gradient on a GPU; found devices {not_gpu}")
                summed = nccl_ops.all_sum(grads)
            elif mode is AllReduceMode.COLLECTIVE:
                instance_key = next_collective_key()
                summed = []
                for g in grads:
                    with tf.device(g.device):
                        summed.append(
                            collective_ops.all_reduce(g, num_towers, group_key, instance_key, "Add", "Id")
                        )
            else:
                with tf.device("/cpu:0"):
                    total = tf.add_n(grads)
                summed = []
                for g in grads:
                    with tf.device(g.device):
                        summed.append(tf.identity(total))
            for k, s in enumerate(summed):
                if average:
                    with tf.device(grads[k].device):
                        s = _mean(s, num_towers)
                reduced[k][i] = s
    return reduced


def aggregate_grads(all_grads, colocation: bool = False, devices=None, average: bool = True):
    """Reduce KxN (grad, var) pairs of towers that share variables into one list of N pairs.

    Args:
        all_grads: ``all_grads[k][i]`` is tower k's ``(grad, var)`` for shared variable i.
        colocation: compute each sum next to its variable.
        devices: without colocation, spread the sums round-robin over these devices (None: let
            TensorFlow place them).
        average: divide by the number of towers.
    """
    if colocation and devices:
        raise ValueError("aggregate_grads: pass either colocation=True or devices, not both")
    num_towers, num_vars = _check_rectangular(all_grads)
    if num_towers == 1:
        return list(all_grads[0])
    out = []
    with tfv1.name_scope("AggregateGrad"):
        for i in range(num_vars):
            var = all_grads[0][i][1]
            names = {all_grads[k][i][1].name for k in range(num_towers)}
            if len(names) != 1:
                raise ValueError(f"towers do not share variable #{i}: got {sorted(names)}")
            grads = [_dense(all_grads[k][i][0]) for k in range(num_towers)]
            if colocation:
                ctx = tfv1.colocate_with(var)
            elif devices:
                ctx = tf.device(devices[i % len(devices)])
            else:
                ctx = contextlib.nullcontext()
            with ctx:
                total = tf.add_n(grads)
                out.append((_mean(total, num_towers) if average else total, var))
    return out


class LeastLoadedDeviceSetter:
    """A device function that puts each new variable on the parameter device holding the fewest
    elements so far, and every other op on the worker device.

    Use it as ``with tf.compat.v1.device(LeastLoadedDeviceSetter('/gpu:0', ['/gpu:0', '/gpu:1'])):``.
    Ops that already name a device keep it.
    """

    def __init__(self, worker_device: str, ps_devices):
        self.worker_device = _canonical_device(worker_device)
        self.ps_devices = [_canonical_device(d) for d in ps_devices]
        if not self.ps_devices:
            raise ValueError("LeastLoadedDeviceSetter needs at least one parameter device")
        self.ps_sizes = [0] * len(self.ps_devices)

    def __call__(self, op) -> str:
        if op.device:
            return op.device
        if op.type not in _VARIABLE_OPS:
            return self.worker_device
        idx = min(range(len(self.ps_devices)), key=self.ps_sizes.__getitem__)
        self.ps_sizes[idx] += _num_elements(op)
        return self.ps_devices[idx]

    def __str__(self) -> str:
        loads = ", ".join(f"{d}={n}" for d, n in zip(self.ps_devices, self.ps_sizes, strict=True))
        return f"LeastLoadedDeviceSetter({loads})"


def _canonical_device(device: str) -> str:
    return tf.DeviceSpec.from_string(device).to_string()


def _num_elements(op) -> int:
    shape = tf.TensorShape(op.get_attr("shape"))
    if not shape.is_fully_defined():
        logger.warning("variable %s has no fully defined shape; counted as size 0 for placement", op.name)
        return 0
    return shape.num_elements()


@contextlib.contextmanager
def override_to_local_variable(enable: bool = True):
    """Variables created inside go to LOCAL_VARIABLES instead of GLOBAL_VARIABLES (not saved, not
    broadcast): used for per-tower replicas."""
    if not enable:
        yield
        return

    # TensorFlow passes the wrapped getter by the keyword "getter".
    def local_getter(getter, name, *args, **kwargs):
        collections = set(kwargs.pop("collections", None) or [tfv1.GraphKeys.GLOBAL_VARIABLES])
        collections.discard(tfv1.GraphKeys.GLOBAL_VARIABLES)
        collections.add(tfv1.GraphKeys.LOCAL_VARIABLES)
        return getter(name, *args, collections=sorted(collections), **kwargs)

    with tfv1.variable_scope(
        tfv1.get_variable_scope(), custom_getter=local_getter, auxiliary_name_scope=False
    ):
        yield
