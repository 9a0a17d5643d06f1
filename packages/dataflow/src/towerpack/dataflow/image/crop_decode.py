"""decode_augmented: decode an encoded image only as far as the first augmentor of a list needs it.

When the first augmentor draws its parameters from the image's shape alone (the crops,
``GoogleNetRandomCropAndResize``, the resizes: ``draws_from_shape``), its transform is drawn from
the JPEG header before anything is decoded, and then:

- a crop decodes only its window: libjpeg-turbo's partial decoding, as TensorFlow's
  ``decode_and_crop_jpeg`` does (the rows above are entropy-decoded only, the columns beside skip
  the inverse DCT, upsampling and colour conversion, the rows below are never read). No
  maintained binding exposes it (PyTurboJPEG's ``crop`` is a lossless transcode that costs as
  much as a full decode; simplejpeg, imagecodecs and OpenCV decode whole images), so a small C
  extension does (:file:`_jpeg_window.c`). The pixels are those of decoding everything and
  cropping. On the benchmark's 500x375 JPEGs and random crops: 0.73 against 0.84 ms. Built
  without libjpeg's headers, the extension is missing and whole images are decoded instead.
- where the transform shrinks the image, or its window, to half or less in both directions, the
  JPEG is decoded at 1/2, 1/4 or 1/8 scale (libjpeg's scaled inverse DCT, which also smooths) and
  the window and the resize are taken at that scale: 2.50 against 1.85 ms for a 1200x900 JPEG at
  1/2, and the resize starts from a quarter of the pixels. The pixels differ a little from
  decoding everything (a window edge moves by up to half a reduced pixel; the tests bound the
  difference); ``dct_scaling=False`` turns it off.

The decoded pixels go to a buffer the thread reuses (a fresh array of a decoded photo costs
about 140 page faults); results never share it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..imgaug.base import AugmentorList
from ..imgaug.colour_matrix import apply_in_order
from ..imgaug.transform import BaseTransform, CropTransform, ResizeTransform
from .decode import Color, JpegHeader, as_encoded_array, decode_image, decode_jpeg, jpeg_header

try:
    from . import _jpeg_window
except ImportError:  # built without libjpeg's headers: whole images are decoded and cropped
    _jpeg_window = None

__all__ = ["DecodePlan", "decode_augmented", "decode_planned", "partial_decoding", "plan_decode"]

#: Decoded images up to this size reuse a per-thread buffer; larger ones get their own array.
_REUSE_BYTES = 16 * 2**20

_REDUCTIONS = (8, 4, 2)
_COLOR_CODES = {Color.BGR: 0, Color.RGB: 1, Color.GRAY: 2}


def partial_decoding() -> bool:
    """Whether windows are decoded alone (the C extension was built), not cut from whole images."""
    return _jpeg_window is not None


@dataclass(frozen=True)
class DecodePlan:
    """Decode at 1/``reduce`` scale, keep ``window`` of that (None: all), then apply ``steps``."""

    reduce: int
    window: CropTransform | None
    steps: tuple[BaseTransform, ...]


def _reduction(h: int, w: int, new_h: int, new_w: int) -> int:
    """The largest of 8, 4, 2 that leaves ``h x w`` at least ``new_h x new_w``, else 1."""
    for r in _REDUCTIONS:
        if h >= r * new_h and w >= r * new_w:
            return r
    return 1


def _scaled_span(start: int, size: int, reduce: int, limit: int) -> tuple[int, int]:
    """``[start, start + size)`` at 1/``reduce`` scale, rounded to whole pixels inside ``[0, limit)``."""
    lo = min(round(start / reduce), limit - 1)
    hi = min(max(round((start + size) / reduce), lo + 1), limit)
    return lo, hi - lo


def plan_decode(
    tfms: Sequence[BaseTransform], height: int, width: int, dct_scaling: bool = True
) -> DecodePlan:
    """How to decode a ``height x width`` image that ``tfms`` (drawn from its shape) start with."""
    tfms = tuple(tfms)
    first = tfms[0] if tfms else None
    resize = tfms[1] if len(tfms) > 1 and isinstance(tfms[1], ResizeTransform) else None
    if isinstance(first, CropTransform):
        if resize is not None and (resize.h, resize.w) == (first.h, first.w) and dct_scaling:
            r = _reduction(first.h, first.w, resize.new_h, resize.new_w)
            if r > 1:
                y0, h = _scaled_span(first.y0, first.h, r, -(-height // r))
                x0, w = _scaled_span(first.x0, first.w, r, -(-width // r))
                scaled = ResizeTransform(h, w, resize.new_h, resize.new_w, resize.interp)
                return DecodePlan(r, CropTransform(y0, x0, h, w), (scaled, *tfms[2:]))
        return DecodePlan(1, first, tfms[1:])
    if isinstance(first, ResizeTransform) and (first.h, first.w) == (height, width) and dct_scaling:
        r = _reduction(height, width, first.new_h, first.new_w)
        if r > 1:
            h, w = -(-height // r), -(-width // r)
            scaled = ResizeTransform(h, w, first.new_h, first.new_w, first.interp)
            return DecodePlan(r, None, (scaled, *tfms[1:]))
    return DecodePlan(1, None, tfms)


_buffers = threading.local()


def _reused_buffer(nbytes: int) -> np.ndarray | None:
    if nbytes > _REUSE_BYTES:
        return None
    buf = getattr(_buffers, "buf", None)
    if buf is None or buf.size < nbytes:
        buf = _buffers.buf = np.empty(nbytes, np.uint8)
    return buf


def decode_planned(buf: Any, header: JpegHeader, plan: DecodePlan, color: Color = Color.BGR) -> np.ndarray:
    """The pixels ``plan`` starts from: its window of the JPEG at its scale, in a buffer this thread
    reuses (copy what you keep). Raises ValueError for data the decoders refuse."""
    channels = 1 if color is Color.GRAY else 3
    window = plan.window
    if window is not None and _jpeg_window is not None:
        shape = (window.h, window.w) if channels == 1 else (window.h, window.w, 3)
        size = window.h * window.w * channels
        out = _reused_buffer(size)
        out = np.empty(size, np.uint8) if out is None else out[:size]
        code = _COLOR_CODES[color]
        _jpeg_window.decode_window(buf, plan.reduce, window.y0, window.x0, window.h, window.w, out, code)
        return out.reshape(shape)
    rows, cols = -(-header.height // plan.reduce), -(-header.width // plan.reduce)
    img = decode_jpeg(buf, header, color, plan.reduce, out=_reused_buffer(rows * cols * channels))
    return img if window is None else window.apply_image(img)


def decode_augmented(
    buf: Any,
    augmentors: AugmentorList,
    color: Color | str = Color.BGR,
    source: Any = None,
    dct_scaling: bool = True,
) -> np.ndarray:
    """``augmentors.augment(decode_image(buf, color, source))``, decoding no more than needed.

    ``dct_scaling=False`` never decodes at a reduced scale: exactly the pixels of decoding and then
    augmenting. The result never shares memory with the reused decode buffer. Errors are
    ``decode_image``'s.
    """
    color = Color.parse(color)
    first = augmentors.augmentors[0] if augmentors.augmentors else None
    data = as_encoded_array(buf, "image" if source is None else f"image {source!r}")
    header = jpeg_header(data) if first is not None and first.draws_from_shape else None
    if header is None:
        img = decode_image(data, color, source)
        return augmentors.augment(img) if first is not None else img
    shape = (header.height, header.width) if color is Color.GRAY else (header.height, header.width, 3)
    tfm = augmentors.get_transform_from_shape(shape)
    plan = plan_decode(tfm.tfms, header.height, header.width, dct_scaling)
    try:
        img = decode_planned(data, header, plan, color)
    except ValueError:  # the fast decoders refuse it: decode_image decodes it whole or names the problem
        return tfm.apply_image(decode_image(data, color, source))
    result = apply_in_order(plan.steps, img)
    buffer = getattr(_buffers, "buf", None)
    if buffer is not None and np.may_share_memory(result, buffer):
        result = result.copy()
    return result
