"""Layers tensorpack removed before 0.11: ImageSample (a spatial transformer's bilinear sampler),
BilinearUpSample and SoftMax. ``towerpack.trainer.models`` re-exports them; they are registered
layers (``ImageSample('sample', [image, coords])``) with the reference's variable names.
"""

from __future__ import annotations

from ..compat import tf, tfv1
from ..legacy.warn import warn_removed
from .registry import layer_register

__all__ = ["BilinearUpSample", "ImageSample", "SoftMax"]

_BORDER_MODES = ("repeat", "constant")


@layer_register(log_shape=True)
def ImageSample(inputs, borderMode="repeat"):
    """Sample images at real-valued coordinates by bilinear interpolation (Jaderberg et al., 2015).

    Args:
        inputs: ``[images, coords]``: images NHWC with static H and W; coords [N, H', W', 2], each
            a (y, x) position in pixels. Integer coordinates give the pixel itself.
        borderMode: ``"repeat"``: positions outside the image take the nearest edge pixel;
            ``"constant"``: they give zeros.

    Returns:
        [N, H', W', C], named ``output``.
    """
    warn_removed("tensorpack.models", "ImageSample")
    image, coords = inputs
    if image.shape.rank != 4 or coords.shape.rank != 4:
        raise ValueError(f"ImageSample needs 4-D images and coords, got {image.shape} and {coords.shape}")
    height, width = image.shape.as_list()[1:3]
    if height is None or width is None:
        raise ValueError(f"ImageSample needs images of static height and width, got shape {image.shape}")
    if borderMode not in _BORDER_MODES:
        raise ValueError(f"ImageSample: borderMode must be one of {_BORDER_MODES}, got {borderMode!r}")
    last = tf.constant([height - 1, width - 1], tf.float32)
    low = tf.floor(tf.maximum(coords, 0.0))
    fy, fx = tf.split(tf.maximum(coords, 0.0) - low, 2, axis=3)
    y0, x0 = tf.split(low, 2, axis=3)

    def pixels(y, x):
        at = tf.cast(tf.clip_by_value(tf.concat([y, x], 3), 0.0, last), tf.int32)
        return tf.gather_nd(image, at, batch_dims=1)

    sampled = tf.add_n(
        [
            pixels(y0, x0) * (1.0 - fy) * (1.0 - fx),
            pixels(y0, x0 + 1) * (1.0 - fy) * fx,
            pixels(y0 + 1, x0) * fy * (1.0 - fx),
            pixels(y0 + 1, x0 + 1) * fy * fx,
        ],
        name="sampled",
    )
    if borderMode == "constant":
        inside = tf.reduce_all(tf.logical_and(coords >= 0.0, coords <= last), axis=3, keepdims=True)
        sampled = sampled * tf.cast(inside, sampled.dtype)
    return tf.identity(sampled, name="output")


@layer_register(log_shape=True)
def BilinearUpSample(x, shape):
    """Upsample NHWC images by the integer factor ``shape`` with bilinear interpolation between
    pixel centres, edges repeated: Caffe's bilinear-filler deconvolution, as the reference computed
    it for one channel (with several channels it summed them; here each channel is its own).

    Returns:
        [N, H * shape, W * shape, C], named ``output``.
    """
    warn_removed("tensorpack.models.pool", "BilinearUpSample")
    if x.shape.rank != 4:
        raise ValueError(f"BilinearUpSample needs a 4-D NHWC input, got shape {x.shape}")
    factor = int(shape)
    if factor < 1:
        raise ValueError(f"BilinearUpSample: the factor must be a positive integer, got {shape!r}")
    out = tf.image.resize(x, tf.shape(x)[1:3] * factor, method="bilinear")
    static = x.shape.as_list()
    out.set_shape([static[0], *(d * factor if d is not None else None for d in static[1:3]), static[3]])
    return tf.identity(out, name="output")


@layer_register(use_scope=None)
def SoftMax(x, use_temperature=False, temperature_init=1.0):
    """Softmax over the last dimension, named ``output``; with ``use_temperature``, of ``x`` times
    a learned scalar ``invtemp`` (1 / temperature, starting at ``1 / temperature_init``)."""
    warn_removed("tensorpack.models", "SoftMax")
    if use_temperature:
        init = tfv1.constant_initializer(1.0 / float(temperature_init))
        x = x * tfv1.get_variable("invtemp", [], initializer=init)
    return tf.nn.softmax(x, name="output")
