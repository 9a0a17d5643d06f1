"""Small graph functions of a tensor: its RMS, a printout of its statistics while the graph runs,
and the PSNR of a prediction (the reference's ``tfutils.symbolic_functions``). The functions the
reference removed from this module before 0.11 (``prediction_incorrect``, ``get_scalar_var``, ...)
are here too, from :mod:`towerpack.trainer.legacy.symbolic`, each warning what to use instead.

``print_stat`` prints with ``tf.print`` (``tf.Print`` is gone from TensorFlow 2): ``x`` comes back
through an identity that depends on the print, so the print runs whenever ``x`` is computed.
"""

from __future__ import annotations

import math
import numbers
import sys

import numpy as np  # noqa: F401  (the reference's module gave `np` and `tf` to old star imports)

from .compat import tf, tfv1
from .legacy import symbolic as _legacy
from .legacy.symbolic import *  # noqa: F403

__all__ = ["print_stat", "psnr", "rms", *_legacy.__all__]


def rms(x, name: str | None = None):
    """Root mean square of ``x`` (a float tensor), a scalar; its ops are under the op's name.

    Without ``name`` the op is ``<x's op name>/rms``, placed by that name whatever the current name
    scope; an explicit ``name`` is relative to the current name scope.
    """
    if name is None:
        with tfv1.name_scope(None):
            return rms(x, x.op.name + "/rms")
    with tfv1.name_scope(name) as scope:
        return tf.sqrt(tf.reduce_mean(tf.square(x)), name=scope)


def print_stat(x, message: str | None = None):
    """``x``, unchanged, that prints when computed (to stderr): ``message`` (default: ``x``'s op
    name), the shape, the mean, the RMS (float tensors only) and up to 20 values per dimension.

    Use it in place of ``x``: ``x = print_stat(x, "logits")``. The returned tensor is named
    ``print_<x's op name>``.
    """
    if not hasattr(x, "op"):
        raise TypeError(f"print_stat takes a graph tensor or variable, got {type(x).__name__}")
    name = x.op.name
    x = tf.convert_to_tensor(x)
    stats = [tf.shape(x), tf.reduce_mean(x)]
    if x.dtype.is_floating:
        stats.append(rms(x))
    show = tf.print(name if message is None else message, *stats, x, summarize=20, output_stream=sys.stderr)
    with tf.control_dependencies([show]):
        return tf.identity(x, name="print_" + name)


def psnr(prediction, ground_truth, maxp: float | None = None, name: str = "psnr"):
    """Peak signal-to-noise ratio in dB: ``20 log10(maxp) - 10 log10(MSE)``, a scalar.

    Args:
        maxp: the largest possible value of a pixel (255 for 8-bit images, 1.0 for images in
            [0, 1]). None: no peak term, the result is ``-10 log10(MSE)`` (a peak of 1).

    Raises:
        ValueError: ``maxp`` is not a positive number.
    """
    if maxp is not None and not (isinstance(maxp, numbers.Real) and maxp > 0):
        raise ValueError(f"psnr: maxp must be a positive number or None, got {maxp!r}")
    mse = tf.reduce_mean(tf.square(prediction - ground_truth))
    noise_db = tf.math.log(mse) * (-10.0 / math.log(10.0))
    if maxp is None:
        return tf.identity(noise_db, name=name)
    return tf.add(noise_db, 20.0 * math.log10(maxp), name=name)
