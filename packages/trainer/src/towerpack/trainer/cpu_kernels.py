"""NCHW ops on a CPU: which ones it can run, how towerpack's sessions run the rest, and the check
before a session that names what cannot run.

TensorFlow's own CPU kernels of convolution and pooling take NHWC only; oneDNN (on by default only on
some x86 CPUs) adds NCHW ones. towerpack's layers never build NCHW ops on a CPU (models/cpu_layout.py
runs them through NHWC), but model code can call TensorFlow's NCHW ops directly
(``tf.nn.depthwise_conv2d(..., data_format='NCHW')``, as the reference's ShuffleNet and HED do).
Where oneDNN is off and no GPU is in sight, the sessions towerpack creates turn on Grappler's
``cpu_layout_conversion`` (NCHW to NHWC), which rewrites those ops, forward and backward, when a
session first runs them, except an op whose own output is fetched. What is left (those fetched ops,
ops with no NCHW CPU kernel at all, sessions without the conversion) would fail at the first step
deep inside TensorFlow; trainers and predictors check first and name each op and the line that made
it.
"""

from __future__ import annotations

import copy
import os

from tensorflow.core.protobuf import rewriter_config_pb2

from towerpack.utils.gpu import get_num_gpu

from .compat import tf

__all__ = [
    "NCHW_NEEDS_ONEDNN",
    "NCHW_NEVER_ON_CPU",
    "CpuLayoutError",
    "check_cpu_kernels",
    "converts_nchw_on_cpu",
    "on_cpu",
    "onednn_enabled",
    "with_cpu_layout_conversion",
]

#: Ops whose NCHW form only oneDNN runs on a CPU (TensorFlow's own CPU kernels take NHWC).
NCHW_NEEDS_ONEDNN = frozenset(
    {
        "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter",
        "MaxPool", "MaxPoolV2", "MaxPoolGrad", "MaxPoolGradGrad", "AvgPool", "AvgPoolGrad",
        "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter",
    }
)  # fmt: skip
#: Ops whose NCHW form no CPU kernel runs (not even for Grappler to rewrite: placement fails first).
NCHW_NEVER_ON_CPU = frozenset({"SpaceToDepth", "DepthToSpace"})
_NCHW_TO_NHWC = rewriter_config_pb2.RewriterConfig.NCHW_TO_NHWC


class CpuLayoutError(ValueError):
    """A graph holds NCHW ops that the CPU they are placed on cannot run."""


def onednn_enabled() -> bool | None:
    """Whether TensorFlow's oneDNN kernels are on in this process (None: cannot tell)."""
    try:
        from tensorflow.python.util import _pywrap_util_port

        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        return None


def on_cpu(device_type: str | None) -> bool:
    """Whether an op placed on ``device_type`` (None: no device named) runs on a CPU here: no type,
    or a GPU, means a GPU where this process sees one; anything else a CPU (soft placement)."""
    return not (device_type in (None, "GPU") and get_num_gpu() > 0)


def with_cpu_layout_conversion(config):
    """``config`` (a ConfigProto; not changed) with Grappler's NCHW-to-NHWC conversion on CPUs, where
    this process needs it: oneDNN off and no GPU (Grappler converts only in a session without GPUs).
    A config that chose a conversion already is returned as it is."""
    rewrite = config.graph_options.rewrite_options
    if onednn_enabled() is not False or get_num_gpu() > 0 or rewrite.cpu_layout_conversion:
        return config
    config = copy.deepcopy(config)
    config.graph_options.rewrite_options.cpu_layout_conversion = _NCHW_TO_NHWC
    return config


def converts_nchw_on_cpu(config) -> bool:
    """Whether a session with ``config`` rewrites NCHW ops on this process's CPU into NHWC ones."""
    if config is None or get_num_gpu() > 0:
        return False
    rewrite = config.graph_options.rewrite_options
    return rewrite.cpu_layout_conversion == _NCHW_TO_NHWC and not rewrite.disable_meta_optimizer


def check_cpu_kernels(graph, config=None, fetches=()) -> None:
    """Raise CpuLayoutError, before a session with ``config`` runs ``graph`` (fetching ``fetches``,
    tensors or their names, where known), for NCHW ops placed on a CPU that cannot run them, naming
    each op and where it was created, instead of TensorFlow's kernel error at the first step."""
    onednn = onednn_enabled()
    if onednn is None:
        return
    unsupported = NCHW_NEVER_ON_CPU if onednn else NCHW_NEVER_ON_CPU | NCHW_NEEDS_ONEDNN
    converted = NCHW_NEEDS_ONEDNN if not onednn and converts_nchw_on_cpu(config) else frozenset()
    fetched = {t.op.name if hasattr(t, "op") else str(t).split(":")[0] for t in fetches}
    bad = [
        op
        for op in graph.get_operations()
        if op.type in unsupported
        and (op.type not in converted or op.name in fetched)
        and op.get_attr("data_format") == b"NCHW"
        and on_cpu(tf.DeviceSpec.from_string(op.device).device_type if op.device else None)
    ]
    if not bad:
        return
    # Gradient ops follow from the forward ones: name those where there are any.
    forward = [op for op in bad if not op.name.startswith("gradients")] or bad
    lines = dict.fromkeys(f"  {op.type} '{op.name}', created at {_created_at(op)}" for op in forward)
    shown = list(lines)[:8] + ([f"  ... and {len(lines) - 8} more"] if len(lines) > 8 else [])
    if any(op.type in NCHW_NEVER_ON_CPU for op in forward):
        why = "no CPU kernel takes NCHW for some of them, oneDNN included"
    elif converted:
        why = "oneDNN is off here, and these are fetched themselves, which Grappler's conversion leaves alone"
    else:
        why = "oneDNN, which has NCHW CPU kernels, is off here"
    fixes = [
        "build them with towerpack's layers (Conv2D, Conv2DTranspose, MaxPooling, AvgPooling: they run "
        "channels_first on any CPU)",
        "build the model channels_last where it runs on a CPU",
    ]
    if not onednn:
        fixes.append("turn oneDNN on (TF_ENABLE_ONEDNN_OPTS=1 before TensorFlow is imported)")
        if not converted:
            fixes.append(
                "let Grappler rewrite them: a session config with graph_options.rewrite_options."
                "cpu_layout_conversion = NCHW_TO_NHWC (towerpack's NewSessionCreator sets it)"
            )
    raise CpuLayoutError(
        f"the graph has channels_first (NCHW) ops placed on a CPU that cannot run them ({why}):\n"
        + "\n".join(shown)
        + "\nTo run them: "
        + "; or ".join(fixes)
        + "."
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
