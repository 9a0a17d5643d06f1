"""Batch statistics over every tower of a process or every process of the job (synchronized BatchNorm).

Each replica computes E[x] and E[x^2] over its own batch; one all-reduce of both averages them
over the replicas; var = E[x^2] - E[x]^2 (biased, as the reference). Gradients flow back through
the all-reduce, so N replicas at batch b compute what one would at batch N*b.
"""

from __future__ import annotations

import enum
import os

from towerpack.utils.placement import placement
from towerpack.utils.resize_files import JOIN_VAR

from .. import logger
from ..collective_group import collective_group
from ..compat import tf, tfv1
from ..graph_builder.cross_tower import tower_all_sum
from ..tower import strip_tower_prefix

__all__ = ["SyncMode", "synchronized_moments"]

_warned: set[tuple[int, str]] = set()


class SyncMode(enum.Enum):
    """Over which replicas ``BatchNorm(sync_statistics=...)`` averages its statistics."""

    NCCL = "nccl"  # the towers of this process (named after the reference's GPU all-reduce)
    # The processes of the job: the Horovod ranks, or under CollectiveAllReduceTrainer its ranks (a
    # script written for Horovod then runs unchanged on TensorFlow's collective ops).
    HOROVOD = "horovod"

    @classmethod
    def parse(cls, value) -> SyncMode | None:
        if value is None or isinstance(value, cls):
            return value
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"sync_statistics must be None, 'nccl' or 'horovod', got {value!r}") from None


def _warn_single(mode: SyncMode, what: str) -> None:
    key = (id(tfv1.get_default_graph()), mode.value)
    if key not in _warned:
        _warned.add(key)
        logger.warning(
            "BatchNorm(sync_statistics=%r) with a single %s: using the local batch statistics",
            mode.value,
            what,
        )


def _horovod():
    try:
        import horovod.tensorflow as hvd
    except ImportError as e:
        raise ImportError(
            "BatchNorm(sync_statistics='horovod') needs Horovod (the towerpack-trainer[horovod] extra), "
            "or a model built under CollectiveAllReduceTrainer"
        ) from e
    try:
        hvd.size()
    except ValueError:
        if os.environ.get(JOIN_VAR) == "1":  # a rank joining a running job starts Horovod later
            return hvd
        raise RuntimeError(
            "BatchNorm(sync_statistics='horovod') needs Horovod initialized: build the model under "
            "HorovodTrainer or CollectiveAllReduceTrainer (or call horovod.tensorflow.init() first)"
        ) from None
    return hvd


def _horovod_size(hvd) -> int:
    """Horovod's size; a rank joining a running job in place (Horovod not started yet) takes its
    launcher's ``WORLD_SIZE``."""
    if os.environ.get(JOIN_VAR) == "1" and not hvd.is_initialized():
        return placement().world_size
    return hvd.size()


def _across_processes(both):
    """The mean of ``both`` over the job's processes: the collective trainer's, else Horovod's."""
    group = collective_group()
    if group is not None:
        if group.size > 1:
            return group.all_reduce(both, average=True, name="sync_moments")
    else:
        hvd = _horovod()
        if _horovod_size(hvd) > 1:
            return hvd.allreduce(both, op=hvd.Average, name="sync_moments")
    _warn_single(SyncMode.HOROVOD, "rank")
    return both


def synchronized_moments(x, axis: int, mode: SyncMode, ctx):
    """The mean and (biased) variance of ``x`` per channel over all replicas (half-precision
    inputs: in float32)."""
    ndims = x.shape.rank
    reduce_axes = [a for a in range(ndims) if a != axis]
    if x.dtype.base_dtype in (tf.float16, tf.bfloat16):
        x = tf.cast(x, tf.float32)
    mean = tf.reduce_mean(x, reduce_axes)
    mean_square = tf.reduce_mean(tf.square(x), reduce_axes)
    both = tf.concat([mean, mean_square], axis=0)
    if mode is SyncMode.NCCL:
        total = getattr(ctx, "total", 1)
        if total == 1:
            _warn_single(mode, "tower")
        else:
            shared_name = strip_tower_prefix(tfv1.get_variable_scope().name) + "/sync_moments"
            both = tower_all_sum(both, shared_name, ctx.index, total) * (1.0 / total)
    else:
        both = _across_processes(both)
    mean, mean_square = tf.split(both, 2)
    return mean, mean_square - tf.square(mean)
