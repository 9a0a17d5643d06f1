"""The processes of a collective job as one group: all-reduce, all-gather and broadcast ops, keys matched.

:class:`~towerpack.trainer.collective_trainer.CollectiveAllReduceTrainer` makes one per graph; layers
that reduce across processes (synchronized BatchNorm) find it with :func:`collective_group`.
"""

from __future__ import annotations

import weakref
import zlib

from tensorflow.python.ops import collective_ops

from .compat import tf, tfv1

__all__ = ["CollectiveGroup", "collective_group", "set_collective_group"]

# One group per device kind: the members of a collective group must all be CPUs or all GPUs.
_HOST_GROUP_KEY, _DEVICE_GROUP_KEY = 1, 2
# The graph check's instance key: fixed, so that it matches even when the ranks' graphs do not.
_CHECK_INSTANCE_KEY = 1
_groups: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def collective_group(graph=None) -> CollectiveGroup | None:
    """The collective group of the trainer building ``graph`` (default: the default graph), or None."""
    return _groups.get(graph if graph is not None else tfv1.get_default_graph())


def set_collective_group(group: CollectiveGroup, graph=None) -> None:
    """Make ``group`` the one that layers built in ``graph`` (default: the default graph) reduce over."""
    _groups[graph if graph is not None else tfv1.get_default_graph()] = group


class CollectiveGroup:
    """The processes of one job as a collective group: all-reduce and broadcast ops with matching keys.

    ``device`` is where this process computes (its tensors' device); ops "on the host" run on its CPU.
    ``timeout_s`` bounds the one-off collectives (the broadcast and the graph check) only: TensorFlow
    starts a thread per execution of a collective with a timeout, which sleeps for the whole
    timeout, so per-step collectives with one pile up threads until the process cannot start any
    more (the trainer bounds its steps through the session's ``operation_timeout_in_ms``).
    Collectives between GPUs use NCCL; between CPUs a ring over gRPC. With NCCL, the all-reduces of a
    process are chained in instance-key order: NCCL kernels launched in different orders on
    different GPUs would wait for each other forever (the ring has no such constraint).
    """

    def __init__(self, size: int, rank: int, device: str, host: str, timeout_s: float = 0.0):
        self.size, self.rank = size, rank
        self.device, self.host = device, host
        self.nccl = tf.DeviceSpec.from_string(device).device_type == "GPU"
        self.timeout_s = float(timeout_s)
        self.instance_keys_used = 0
        self._last_nccl = None

    def _next_key(self) -> int:
        self.instance_keys_used += 1
        return _CHECK_INSTANCE_KEY + self.instance_keys_used

    def reduce(self, t, average: bool = False, on_host: bool = False):
        """The sum (or mean) of ``t`` over the processes (no gradient: for gradients and statistics)."""
        return self._collective(tf.convert_to_tensor(t), "Add", "Div" if average else "Id", on_host)

    def _collective(
        self,
        t,
        merge: str,
        final: str,
        on_host: bool,
        instance_key: int | None = None,
        timeout_s: float = 0.0,
    ):
        nccl = self.nccl and not on_host
        key = self._next_key() if instance_key is None else instance_key
        deps = [self._last_nccl] if nccl and self._last_nccl is not None else []
        with tf.device(self.host if on_host else self.device), tf.control_dependencies(deps):
            out = collective_ops.all_reduce_v2(
                t,
                group_size=self.size,
                group_key=_HOST_GROUP_KEY if not nccl else _DEVICE_GROUP_KEY,
                instance_key=key,
                merge_op=merge,
                final_op=final,
                communication_hint="nccl" if nccl else "ring",
                timeout=timeout_s,
            )
        if nccl:
            self._last_nccl = out
        return out

    def all_reduce(self, t, average: bool = False, on_host: bool = False, name: str | None = None):
        """The sum (or mean) of ``t`` over the processes; its gradient is the same reduction of the
        incoming gradients, so a value computed from every process's batch trains like one batch."""
        t = tf.convert_to_tensor(t)
        if self.size == 1:
            return tf.identity(t, name=name)

        @tf.custom_gradient
        def reduce(x):
            def grad(dy):
                return self.reduce(dy, average, on_host)

            return self.reduce(x, average, on_host), grad

        with tf.name_scope(name or "CollectiveAllReduce"):
            return reduce(t)

    def all_gather(self, t, name: str | None = None):
        """Every process's ``t`` (of one shape in all), concatenated along the first dimension in the
        group's order (on the host; no gradient)."""
        t = tf.convert_to_tensor(t)
        if self.size == 1:
            return tf.identity(t, name=name)
        with tf.device(self.host), tf.name_scope(name or "CollectiveAllGather"):
            return collective_ops.all_gather_v2(
                t, self.size, _HOST_GROUP_KEY, self._next_key(), communication_hint="ring"
            )

    def broadcast_from_rank0(self, t):
        """Rank 0's value of ``t`` (on the host), in every process."""
        key = self._next_key()
        shape = t.shape.as_list() if t.shape.is_fully_defined() else tf.shape(t)
        with tf.device(self.host):
            if self.rank == 0:
                return collective_ops.broadcast_send_v2(
                    t, self.size, _HOST_GROUP_KEY, key, communication_hint="ring", timeout=self.timeout_s
                )
            return collective_ops.broadcast_recv_v2(
                shape,
                t.dtype,
                self.size,
                _HOST_GROUP_KEY,
                key,
                communication_hint="ring",
                timeout=self.timeout_s,
            )

    def graph_check(self, variables: list):
        """An op whose value is ``[max, -min]`` over the processes of a fingerprint of this graph:
        equal to ``[f, -f]`` of the local fingerprint ``f`` (``self.fingerprint``) when all agree."""
        text = ";".join(
            f"{v.op.name}:{v.dtype.name}:{v.shape}" for v in sorted(variables, key=lambda v: v.op.name)
        )
        self.fingerprint = float(zlib.crc32(f"{text}|{self.instance_keys_used}".encode()))
        local = tf.constant([self.fingerprint, -self.fingerprint], tf.float64)
        return self._collective(
            local, "Max", "Id", on_host=True, instance_key=_CHECK_INSTANCE_KEY, timeout_s=self.timeout_s
        )
