"""Whether running some fetches would run a given op: for callbacks that want to do work only
in the session runs that compute a certain tensor."""

from __future__ import annotations

import weakref

from .compat import tf

__all__ = ["dependency_of_fetches", "dependency_of_targets"]

# graph -> {targets: the ops those targets depend on}
_ANCESTORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _ancestors(graph, targets: tuple) -> frozenset:
    cache = _ANCESTORS.setdefault(graph, {})
    if targets not in cache:
        seen, stack = set(), [t.op if isinstance(t, tf.Tensor) else t for t in targets]
        while stack:
            op = stack.pop()
            if op in seen:
                continue
            seen.add(op)
            stack.extend(t.op for t in op.inputs)
            stack.extend(op.control_inputs)
        cache[targets] = frozenset(seen)
    return cache[targets]


def _as_op(x):
    if isinstance(x, tf.Tensor):
        return x.op
    if not isinstance(x, tf.Operation):
        raise TypeError(f"expected a tf.Operation or tf.Tensor, got {x!r}")
    return x


def dependency_of_targets(targets, op) -> bool:
    """Whether ``op`` (an op or a tensor) is among the ops that ``targets`` (a tuple of ops and
    tensors) depend on, through data or control inputs. Memoized per graph and ``targets``."""
    op = _as_op(op)
    targets = tuple(targets)
    if not targets:
        return False
    return op in _ancestors(op.graph, targets)


def dependency_of_fetches(fetches, op) -> bool:
    """``dependency_of_targets`` for anything ``sess.run`` takes as fetches (nested lists, tuples,
    dicts of ops, tensors, variables or their names)."""
    op = _as_op(op)
    graph = op.graph
    targets = []
    for f in tf.nest.flatten(fetches):
        if f is None:
            continue
        element = graph.as_graph_element(f, allow_tensor=True, allow_operation=True)
        targets.append(element)
    return dependency_of_targets(tuple(targets), op)
