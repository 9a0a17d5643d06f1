"""Before a session runs a graph: NCHW ops placed on a CPU that has no kernel for them.

towerpack's layers never build such ops (models/cpu_layout.py runs them through NHWC on a CPU), but
model code can call TensorFlow's NCHW ops directly (``tf.nn.depthwise_conv2d(...,
data_format='NCHW')``). Without oneDNN those fail at the first step, deep inside the session, with a
kernel error; the trainers and predictors check first and name each op and the line that made it.
"""

from __future__ import annotations

import os

from .compat import tf
from .models.cpu_layout import on_cpu

__all__ = ["NCHW_NEEDS_ONEDNN", "NCHW_NEVER_ON_CPU", "CpuLayoutError", "check_cpu_kernels", "onednn_enabled"]


#: Ops whose NCHW form only oneDNN runs on a CPU (TensorFlow's own CPU kernels take NHWC).
NCHW_NEEDS_ONEDNN = frozenset(
    {
        "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter",
        "MaxPool", "MaxPoolV2", "MaxPoolGrad", "MaxPoolGradGrad", "AvgPool", "AvgPoolGrad",
        "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter",
    }
)  # fmt: skip
#: Ops whose NCHW form no CPU kernel runs.
NCHW_NEVER_ON_CPU = frozenset({"SpaceToDepth", "DepthToSpace"})


class CpuLayoutError(ValueError):
    """A graph holds NCHW ops that the CPU they are placed on cannot run."""


def onednn_enabled() -> bool | None:
    """Whether TensorFlow's oneDNN kernels are on in this process (None: cannot tell)."""
    try:
        from tensorflow.python.util import _pywrap_util_port

        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        return None


def check_cpu_kernels(graph) -> None:
    """Raise CpuLayoutError, before a session runs ``graph``, for NCHW ops placed on a CPU that has
    no kernel for them (towerpack's layers never build such ops; direct ``tf.nn`` calls can), naming
    each op and where it was created, instead of TensorFlow's kernel error at the first step."""
    onednn = onednn_enabled()
    if onednn is None:
        return
    unsupported = NCHW_NEVER_ON_CPU if onednn else NCHW_NEVER_ON_CPU | NCHW_NEEDS_ONEDNN
    bad = [
        op
        for op in graph.get_operations()
        if op.type in unsupported
        and op.get_attr("data_format") == b"NCHW"
        and on_cpu(tf.DeviceSpec.from_string(op.device).device_type if op.device else None)
    ]
    if not bad:
        return
    # Gradient ops follow from the forward ones: name those where there are any.
    forward = [op for op in bad if not op.name.startswith("gradients")] or bad
    lines = dict.fromkeys(f"  {op.type} '{op.name}', created at {_created_at(op)}" for op in forward)
    shown = list(lines)[:8] + ([f"  ... and {len(lines) - 8} more"] if len(lines) > 8 else [])
    why = (
        "oneDNN, which has NCHW CPU kernels, is off here"
        if not onednn
        else "no CPU kernel takes NCHW for these ops, oneDNN included"
    )
    raise CpuLayoutError(
        "the graph has channels_first (NCHW) ops placed on a CPU that cannot run them "
        f"({why}):\n" + "\n".join(shown) + "\n"
        "Build them with towerpack's layers (Conv2D, Conv2DTranspose, MaxPooling, AvgPooling: they run "
        "channels_first on any CPU), or build the model channels_last where it runs on a CPU"
        + (
            ", or turn oneDNN on (TF_ENABLE_ONEDNN_OPTS=1 before TensorFlow is imported)."
            if not onednn
            else "."
        )
    )


def _created_at(op) -> str:
    """The innermost frame of the code that created ``op`` outside the installed libraries and
    towerpack (the user's model code)."""
    import towerpack

    libraries = (*towerpack.__path__, os.path.dirname(os.path.dirname(tf.__file__)))
    for frame in reversed(list(op.traceback or ())):
        if not frame.filename.startswith(libraries):
            return f"{frame.filename}:{frame.lineno}"
    return "an unknown place"
