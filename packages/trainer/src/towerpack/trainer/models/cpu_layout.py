"""channels_first on CPUs: run the ops that have no NCHW CPU kernel through NHWC.

TensorFlow's own CPU kernels of convolution and pooling (Conv2D, its gradients and transpose,
MaxPool, AvgPool) take NHWC only; oneDNN adds NCHW ones, and TensorFlow turns it on by default
only on some x86 CPUs. A layer given ``channels_first`` therefore asks where its op will be
placed. On a GPU it builds the NCHW op as written, so GPU graphs are exactly what they were. On a
CPU it transposes its input to NHWC, runs the NHWC op and transposes the result back. It does so
whether or not oneDNN is on here, so that a graph built, checkpointed or exported on one CPU runs
on every CPU.

Placement is read from the graph's device scope when the layer is built: a device naming a GPU
(or none at all) means GPU only when this process can see a GPU; otherwise the op would run (or
be soft-placed) on a CPU.
"""

from __future__ import annotations

import collections.abc
import enum

from ..compat import tf, tfv1
from ..cpu_kernels import on_cpu

__all__ = ["Layout", "layout_for", "placed_on_cpu", "planned_device_type", "run_in_layout"]

_TO_NHWC = [0, 2, 3, 1]
_TO_NCHW = [0, 3, 1, 2]


class Layout(enum.Enum):
    """How a layer builds an op that takes a data format."""

    NHWC = "NHWC"
    NCHW = "NCHW"
    NCHW_THROUGH_NHWC = "NCHW through NHWC"

    @property
    def op_format(self) -> str:
        """The ``data_format`` the TensorFlow op is given."""
        return "NCHW" if self is Layout.NCHW else "NHWC"


class _PlannedOp:
    """What the graph's device functions see of an op that is about to be created: its type and
    (so far) no device. Device functions such as ``replica_device_setter`` decide by type."""

    def __init__(self, op_type: str):
        self.type = op_type
        self.name = op_type
        self.device = ""
        self.node_def = tfv1.NodeDef(op=op_type, name=op_type)
        self.inputs = ()

    def _set_device_from_string(self, device: str) -> None:
        self.device = device
        self.node_def.device = device


def planned_device_type(op_type: str) -> str | None:
    """``'CPU'``, ``'GPU'`` (or another type) for an op of ``op_type`` created here, or None
    where the device scope names no device type."""
    op = _PlannedOp(op_type)
    graph = tfv1.get_default_graph()
    try:
        graph._apply_device_functions(op)
    except Exception:  # a device function that needs more of an op than its type: unknown
        return None
    if not op.device:
        return None
    return tf.DeviceSpec.from_string(op.device).device_type


def placed_on_cpu(op_type: str) -> bool:
    """Whether an op of ``op_type`` created here runs on a CPU (named, or soft-placed there)."""
    return on_cpu(planned_device_type(op_type))


def layout_for(op_type: str, nchw: bool) -> Layout:
    """The layout an op of ``op_type`` (one with no NCHW CPU kernel) is built in here."""
    if not nchw:
        return Layout.NHWC
    return Layout.NCHW_THROUGH_NHWC if placed_on_cpu(op_type) else Layout.NCHW


def run_in_layout(
    x, nchw: bool, op_type: str, build: collections.abc.Callable[[tf.Tensor, Layout], tf.Tensor]
) -> tf.Tensor:
    """``build(x, layout)`` for an op of ``op_type`` in a ``channels_first`` (``nchw``) or
    ``channels_last`` layer; on a CPU the NCHW input reaches ``build`` as NHWC and its result is
    returned as NCHW. ``build`` passes ``layout.op_format`` to the op as its data format."""
    layout = layout_for(op_type, nchw)
    if layout is not Layout.NCHW_THROUGH_NHWC:
        return build(x, layout)
    y = build(tf.transpose(x, _TO_NHWC, name="to_nhwc"), layout)
    return tf.transpose(y, _TO_NCHW, name="to_nchw")
