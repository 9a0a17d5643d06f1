"""Summaries a model adds while building its graph: moving averages of scalars, tensor summaries
(histogram, mean, rms, sparsity), and summaries of parameters and activations; and ``Summary``
protobufs built in Python from a value or from images (what monitors write to event files).

Only the main training tower adds summaries; calls from other towers are no-ops, so a tower
function can call these unconditionally. Tags follow the reference: ``add_tensor_summary`` names
each summary ``<name>-summary``, ``-histogram``, ``-sparsity``, ``-mean`` or ``-rms`` under the
current name scope.
"""

from __future__ import annotations

import io

import numpy as np

from . import logger
from .common import full_match
from .compat import tf, tfv1
from .scope_utils import cached_name_scope
from .symbolic_functions import rms
from .tower import MOVING_SUMMARY_OPS, in_main_training_tower, strip_tower_prefix

__all__ = [
    "MOVING_SUMMARY_OPS",
    "add_activation_summary",
    "add_moving_summary",
    "add_param_summary",
    "add_tensor_summary",
    "create_image_summary",
    "create_scalar_summary",
]


def _clean_name(tensor) -> str:
    return strip_tower_prefix(tensor.op.name)


def add_moving_summary(
    *tensors, decay: float = 0.95, collection: str | None = MOVING_SUMMARY_OPS, summary_collections=None
) -> list:
    """Track an exponential moving average of each scalar tensor and summarize it (tag
    ``<name>-summary``, the tensor's op name without a ``tower<k>/`` prefix).

    The averages are updated on every training step by the ``MovingAverageSummary`` callback
    (one of the defaults), which runs the ops of ``collection``, and reach the monitors with the
    epoch's summaries. Returns the average tensors (an empty list outside the main training tower
    or under a reusing variable scope). With ``collection=None`` nothing updates the averages
    except running the returned tensors, which update and then read them.
    """
    if not in_main_training_tower():
        return []
    if tfv1.get_variable_scope().reuse is True:
        logger.warning("add_moving_summary() called under reuse=True; no summaries are added")
        return []
    graph = tfv1.get_default_graph()
    averages = []
    for t in tensors:
        if not isinstance(t, tf.Tensor):
            raise TypeError(f"add_moving_summary takes tensors, got {t!r}")
        if t.shape.ndims != 0:
            raise ValueError(f"add_moving_summary needs scalar tensors; {t.name} has shape {t.shape}")
        name = _clean_name(t)
        with tfv1.name_scope(f"EMA/{name}/"):
            value = tfv1.get_variable(
                f"EMA/{name}/value", shape=[], initializer=tfv1.zeros_initializer(), trainable=False
            )
            count = tfv1.get_variable(
                f"EMA/{name}/count", shape=[], initializer=tfv1.zeros_initializer(), trainable=False
            )
            # ``value`` holds the average with the bias towards its zero start divided out (as Adam
            # does for its moments), updated in place: avg += (x - avg) * (1 - decay) / (1 - decay^n).
            # Summaries read this one variable, so a read racing with the update in the same step
            # sees the average before or after it, never a mix of two variables.
            x = tf.cast(t, tf.float32)
            n = tfv1.assign_add(count, 1.0)
            rate = (1.0 - decay) / tf.maximum(1.0 - tf.pow(decay, n), 1e-12)
            update = tf.group(tfv1.assign(value, value + (x - value) * rate), name="update")
            if collection is not None:
                graph.add_to_collection(collection, update)
            with tf.control_dependencies([update] if collection is None else []):
                average = tf.identity(value.read_value(), name="average")
        with tfv1.name_scope(None):
            tfv1.summary.scalar(name + "-summary", average, collections=summary_collections)
        averages.append(average)
    return averages


_SUMMARY_TYPES = {
    "scalar": lambda x, name, coll: tfv1.summary.scalar(name + "-summary", x, collections=coll),
    "histogram": lambda x, name, coll: tfv1.summary.histogram(name + "-histogram", x, collections=coll),
    "sparsity": lambda x, name, coll: tfv1.summary.scalar(
        name + "-sparsity", tf.math.zero_fraction(x), collections=coll
    ),
    "mean": lambda x, name, coll: tfv1.summary.scalar(name + "-mean", tf.reduce_mean(x), collections=coll),
    "rms": lambda x, name, coll: tfv1.summary.scalar(name + "-rms", rms(x), collections=coll),
}


def add_tensor_summary(x, types, name: str | None = None, collections=None, main_tower_only: bool = True):
    """Summarize a tensor in the current name scope, once per type in ``types``: ``scalar``
    (tag ``<name>-summary``), ``histogram`` (``<name>-histogram``), ``sparsity`` (fraction of
    zeros, ``<name>-sparsity``), ``mean`` (``<name>-mean``), ``rms`` (``<name>-rms``).

    Args:
        name: default ``x.op.name``.
        collections: the summaries' collections (default: ``SUMMARIES``).
        main_tower_only: a no-op in towers other than the main training tower.

    Raises:
        KeyError: an unknown type.
    """
    types = list(types) if not isinstance(types, str) else [types]
    unknown = [t for t in types if t not in _SUMMARY_TYPES]
    if unknown:
        raise KeyError(f"unknown summary type(s) {unknown}; choose from {sorted(_SUMMARY_TYPES)}")
    if main_tower_only and not in_main_training_tower():
        return
    name = name or x.op.name
    for kind in dict.fromkeys(types):
        _SUMMARY_TYPES[kind](x, name, collections)


def add_activation_summary(x, types=None, name: str | None = None, collections=None) -> None:
    """``add_tensor_summary`` of an activation under the name scope ``activation-summary``
    (default types: sparsity, rms, histogram). Tensors of rank < 2 are skipped with a warning."""
    ndims = x.shape.ndims
    if ndims is not None and ndims < 2:
        logger.warning("Cannot summarize scalar activation %s", x.name)
        return
    types = ["sparsity", "rms", "histogram"] if types is None else types
    with cached_name_scope("activation-summary"):
        add_tensor_summary(x, types, name=name, collections=collections)


def add_param_summary(*summary_lists, collections=None) -> None:
    """Summarize trainable variables: each argument is ``(regex, types)``; every trainable
    variable whose op name matches a regex in full gets ``add_tensor_summary(var, types)``,
    under the name scope ``param-summary``. Main training tower only.

    Example: ``add_param_summary((".*/W", ["histogram", "rms"]), (".*/gamma", ["scalar"]))``
    """
    for item in summary_lists:
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str)):
            raise TypeError(f"add_param_summary takes (regex, [types]) pairs, got {item!r}")
    if not in_main_training_tower():
        return
    params = tfv1.get_collection(tfv1.GraphKeys.TRAINABLE_VARIABLES)
    with cached_name_scope("param-summary"):
        for p in params:
            name = p.op.name
            for regex, types in summary_lists:
                if full_match(regex, name):
                    add_tensor_summary(p, types, name=name, collections=collections)


def create_scalar_summary(name: str, value) -> tfv1.Summary:
    """A ``Summary`` holding one scalar, ``float(value)``, tagged ``name``."""
    if not isinstance(name, str):
        raise TypeError(f"a summary's name must be a str, got {type(name).__name__}")
    return tfv1.Summary(value=[tfv1.Summary.Value(tag=name, simple_value=float(value))])


def create_image_summary(name: str, images) -> tfv1.Summary:
    """A ``Summary`` holding PNG images, from an ``NHWC`` array (C = 1, 2, 3 or 4: grey, grey and
    alpha, RGB, RGBA) with values in 0..255 (clipped, then cast to uint8).

    The tag is ``name`` for a single image and ``name/k`` for image ``k`` of several.
    """
    from PIL import Image  # pillow: only image summaries need it here

    if not isinstance(name, str):
        raise TypeError(f"a summary's name must be a str, got {type(name).__name__}")
    images = np.asarray(images)
    if images.ndim != 4 or images.shape[3] not in (1, 2, 3, 4):
        raise ValueError(
            f"image summary {name!r}: expected NHWC images with 1-4 channels, got {images.shape}"
        )
    if images.dtype != np.uint8:
        images = np.clip(images, 0, 255).astype(np.uint8)
    n, h, w, c = images.shape
    values = []
    for k, img in enumerate(images):
        png = io.BytesIO()
        # Pillow reads the mode from the shape: L, LA, RGB or RGBA.
        Image.fromarray(img[:, :, 0] if c == 1 else img).save(png, format="PNG")
        image = tfv1.Summary.Image(height=h, width=w, colorspace=c, encoded_image_string=png.getvalue())
        values.append(tfv1.Summary.Value(tag=name if n == 1 else f"{name}/{k}", image=image))
    return tfv1.Summary(value=values)
