"""Helpers shared by the input sources: signatures, placeholders, datapoint checks, graph dependencies."""

from __future__ import annotations

import logging
from collections.abc import Iterable

import numpy as np

from ..compat import tf, tfv1

logger = logging.getLogger("towerpack.trainer.input_source")

__all__ = [
    "DatapointChecker",
    "depends_on",
    "placeholders_for",
    "spec_name",
]


def spec_name(spec, index: int) -> str:
    """The input's name: the TensorSpec's name, or ``input<index>`` when it has none."""
    name = getattr(spec, "name", None)
    return name or f"input{index}"


def _as_spec(spec, index: int):
    if isinstance(spec, tf.TensorSpec):
        return spec
    if isinstance(spec, tf.Tensor):  # a placeholder given as signature (older ModelDesc style)
        return tf.TensorSpec(spec.shape, spec.dtype, spec.op.name)
    raise TypeError(f"input signature element {index} must be a tf.TensorSpec, got {type(spec).__name__}")


def placeholders_for(input_signature) -> list:
    """One placeholder per TensorSpec, named like the spec, in the current name scope."""
    out = []
    for i, spec in enumerate(input_signature):
        spec = _as_spec(spec, i)
        out.append(tfv1.placeholder(spec.dtype, shape=spec.shape, name=spec_name(spec, i)))
    return out


class DatapointChecker:
    """Checks datapoints against an input signature and returns their components in signature order.

    A datapoint is a list/tuple in signature order or a dict keyed by input name. Shapes must be
    compatible with the specs; the error names the input and both shapes. Built once per
    source: a datapoint of arrays whose shapes were seen before costs one tuple lookup.
    """

    #: How many distinct shape combinations are remembered as valid.
    _MAX_KNOWN = 64

    def __init__(self, input_signature, where: str):
        self.where = where
        self.names = [spec_name(s, i) for i, s in enumerate(input_signature)]
        self.shapes = [None if s.shape.rank is None else tuple(s.shape.as_list()) for s in input_signature]
        self._known: set[tuple] = set()

    def __call__(self, dp) -> list:
        if type(dp) is list and len(dp) == len(self.names):
            try:
                if tuple([v.shape for v in dp]) in self._known:
                    return dp
            except AttributeError:  # not all arrays: the full check below
                pass
        dp = self._check(dp)
        if len(self._known) < self._MAX_KNOWN and all(isinstance(v, np.ndarray) for v in dp):
            self._known.add(tuple(v.shape for v in dp))
        return dp

    def _check(self, dp) -> list:
        if isinstance(dp, dict):
            missing = [n for n in self.names if n not in dp]
            if missing:
                raise ValueError(
                    f"{self.where}: datapoint lacks input(s) {missing}; it has keys {sorted(dp)}"
                )
            dp = [dp[n] for n in self.names]
        elif not isinstance(dp, (list, tuple)):
            raise TypeError(
                f"{self.where}: a datapoint must be a list, tuple or dict, got {type(dp).__name__}"
            )
        if len(dp) != len(self.names):
            raise ValueError(
                f"{self.where}: datapoint has {len(dp)} component(s) but the input signature has "
                f"{len(self.names)} ({', '.join(self.names)})"
            )
        for name, want, value in zip(self.names, self.shapes, dp, strict=True):
            if want is None:
                continue
            have = value.shape if isinstance(value, np.ndarray) else np.shape(value)
            if len(have) != len(want) or any(
                w is not None and w != h for w, h in zip(want, have, strict=True)
            ):
                raise ValueError(
                    f"{self.where}: input '{name}' expects shape {list(want)}, got an array of {list(have)}"
                )
        return dp if isinstance(dp, list) else list(dp)


def _as_ops(fetches) -> Iterable:
    """Flatten fetches (nested lists/dicts/tuples of tensors, ops or names) into graph operations."""
    if fetches is None:
        return
    if isinstance(fetches, dict):
        for v in fetches.values():
            yield from _as_ops(v)
    elif isinstance(fetches, (list, tuple)):
        for v in fetches:
            yield from _as_ops(v)
    elif isinstance(fetches, tf.Tensor):
        yield fetches.op
    elif isinstance(fetches, tf.Operation):
        yield fetches
    elif isinstance(fetches, str):
        graph = tfv1.get_default_graph()
        el = graph.as_graph_element(fetches)
        yield el if isinstance(el, tf.Operation) else el.op
    elif hasattr(fetches, "op"):  # variables
        yield fetches.op


def depends_on(fetches, targets) -> bool:
    """Whether running ``fetches`` requires any of the ``targets`` ops (data and control inputs)."""
    targets = set(targets)
    seen = set()
    stack = list(_as_ops(fetches))
    while stack:
        op = stack.pop()
        if op in targets:
            return True
        if op in seen:
            continue
        seen.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return False
