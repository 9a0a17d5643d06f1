"""All-reduce across the towers of one process, called from inside each tower's function.

Towers are built one after another, so an op in tower 0 cannot take tower 1's tensor as an
input. Collective ops solve this the way NCCL's ``shared_name`` does: every tower builds its
own all-reduce with the same key (derived from a name the towers share, such as a layer's
variable scope), and the ops meet when the step runs. On GPUs the collective uses NCCL; on
(logical) CPU devices it reduces on the host. The gradient of the sum is the sum of the
gradients, reduced the same way.

A key used by some towers but not all would make the step wait forever: ``check_complete``
(called by the builders once every tower exists) turns that into an error at graph time.
"""

from __future__ import annotations

import weakref

from tensorflow.python.ops import collective_ops

from ..compat import tf, tfv1
from .utils import next_collective_key

__all__ = ["check_complete", "tower_all_sum"]


class _GraphKeys:
    """The collective keys of one graph, and which towers used each."""

    def __init__(self):
        self.keys: dict = {}
        self.users: dict[str, list[int]] = {}

    def key(self, name) -> int:
        if name not in self.keys:
            self.keys[name] = next_collective_key()
        return self.keys[name]


_BY_GRAPH: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _graph_keys() -> _GraphKeys:
    graph = tfv1.get_default_graph()
    if graph not in _BY_GRAPH:
        _BY_GRAPH[graph] = _GraphKeys()
    return _BY_GRAPH[graph]


def _reduce(t, group_size: int, group_key: int, instance_key: int):
    hint = "nccl" if "GPU" in (t.device or "").upper() else "auto"
    return collective_ops.all_reduce(
        t, group_size, group_key, instance_key, "Add", "Id", communication_hint=hint
    )


def tower_all_sum(x, shared_name: str, tower_index: int, num_towers: int):
    """The sum of ``x`` over the ``num_towers`` towers; every tower calls it with the same
    ``shared_name`` (once per tower and step), in its own device scope."""
    if num_towers == 1:
        return x
    keys = _graph_keys()
    users = keys.users.setdefault(shared_name, [])
    if tower_index in users:
        raise ValueError(
            f"tower {tower_index} reduces {shared_name!r} across towers twice; a layer that synchronizes "
            "across towers can be called once per tower (no reuse within a tower)"
        )
    users.append(tower_index)
    group = keys.key(("group", num_towers))
    forward, backward = keys.key(shared_name), keys.key((shared_name, "grad"))

    @tf.custom_gradient
    def all_sum(t):
        def grad(dy):
            return _reduce(dy, num_towers, group, backward)

        return _reduce(t, num_towers, group, forward), grad

    return all_sum(x)


def check_complete(num_towers: int) -> None:
    """Raise if a cross-tower reduction of the default graph was not built by every tower."""
    keys = _graph_keys()
    partial = {name: sorted(u) for name, u in keys.users.items() if len(u) != num_towers}
    if partial:
        details = "; ".join(f"{name!r} in towers {u}" for name, u in sorted(partial.items()))
        raise ValueError(
            f"cross-tower reductions must be built by all {num_towers} towers, with the same names "
            f"(a synchronized BatchNorm must have the same name in every tower); only found {details}"
        )
