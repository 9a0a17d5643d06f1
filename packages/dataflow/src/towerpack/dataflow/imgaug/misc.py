"""Flips, resizes and transposes: the geometric augmentors that need no warp.

``RandomResize`` fixes a reference bug: with its defaults (``yrange=None`` and an aspect-ratio
threshold) the reference raised TypeError; here a missing ``yrange`` means "same as ``xrange``" for
scale factors and "keep the aspect ratio" for pixel sizes.
"""

from __future__ import annotations

import logging
from typing import Any

import cv2
import numpy as np

from .base import ImageAugmentor, shape2d
from .transform import BaseTransform, FlipTransform, NoOpTransform, ResizeTransform, TransposeTransform

__all__ = ["Flip", "RandomResize", "Resize", "ResizeShortestEdge", "Transpose"]

logger = logging.getLogger(__name__)

#: Rejection-sampling attempts of RandomResize before it keeps the image size.
_RESIZE_TRIES = 50


class Flip(ImageAugmentor):
    """Mirror the image left-right (``horiz``) or upside down (``vert``) with probability ``prob``."""

    draws_from_shape = True

    def __init__(self, horiz: bool = False, vert: bool = False, prob: float = 0.5) -> None:
        super().__init__()
        if horiz and vert:
            raise ValueError("Flip cannot do both horiz and vert; use two Flip augmentors instead")
        if not (horiz or vert):
            raise ValueError("Flip needs one of horiz=True or vert=True")
        self._init(locals())

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        h, w = img.shape[:2]
        if self._rand_range() < self.prob:
            return FlipTransform(h, w, horiz=bool(self.horiz))
        return NoOpTransform()


class Resize(ImageAugmentor):
    """Resize to a fixed ``shape``: an int (square) or ``(h, w)``."""

    draws_from_shape = True

    def __init__(self, shape: Any, interp: int = cv2.INTER_LINEAR) -> None:
        super().__init__()
        shape = shape2d(shape, "Resize shape")
        self._init(locals())

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        h, w = img.shape[:2]
        return ResizeTransform(h, w, self.shape[0], self.shape[1], self.interp)


class ResizeShortestEdge(ImageAugmentor):
    """Resize so that the shorter side is ``size``, keeping the aspect ratio (long side rounded)."""

    draws_from_shape = True

    def __init__(self, size: int, interp: int = cv2.INTER_LINEAR) -> None:
        super().__init__()
        size = int(size)
        if size < 1:
            raise ValueError(f"ResizeShortestEdge size must be >= 1, got {size}")
        self._init(locals())

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        h, w = img.shape[:2]
        scale = self.size * 1.0 / min(h, w)
        if h < w:
            new_h, new_w = self.size, int(scale * w + 0.5)
        else:
            new_h, new_w = int(scale * h + 0.5), self.size
        return ResizeTransform(h, w, new_h, new_w, self.interp)


class RandomResize(ImageAugmentor):
    """Resize to a random size.

    ``xrange``/``yrange`` are ``(low, high)`` pairs: floats are scale factors of the width/height,
    ints are target sizes in pixels (drawn as continuous values, then rounded). ``minimum`` is
    ``(min_width, min_height)`` in pixels. With ``aspect_ratio_thres == 0`` the aspect ratio is kept
    (``yrange`` unused); otherwise x and y are drawn independently until the aspect ratio changes by
    less than the threshold (after 50 failures the size is kept, with a warning).
    """

    draws_from_shape = True

    def __init__(
        self,
        xrange: tuple[float, float],
        yrange: tuple[float, float] | None = None,
        minimum: tuple[int, int] = (0, 0),
        aspect_ratio_thres: float = 0.15,
        interp: int = cv2.INTER_LINEAR,
    ) -> None:
        super().__init__()
        if aspect_ratio_thres < 0:
            raise ValueError(f"aspect_ratio_thres must be >= 0, got {aspect_ratio_thres}")
        self.is_float = _range_kind(xrange, "xrange")
        if yrange is not None:
            if _range_kind(yrange, "yrange") != self.is_float:
                raise ValueError(f"xrange {xrange!r} and yrange {yrange!r} must both be floats or both ints")
            if aspect_ratio_thres == 0:
                logger.warning("RandomResize: yrange is ignored when aspect_ratio_thres == 0")
        self._init(locals())

    def _draw_size(self, h: int, w: int) -> tuple[int, int]:
        sx = float(self._rand_range(*self.xrange))
        keep_aspect = self.aspect_ratio_thres == 0 or (self.yrange is None and not self.is_float)
        if self.is_float:
            sy = sx if keep_aspect else float(self._rand_range(*(self.yrange or self.xrange)))
            dest_w, dest_h = sx * w, sy * h
        else:
            dest_w = sx
            dest_h = sx * h / w if keep_aspect else float(self._rand_range(*self.yrange))
        dest_w = max(dest_w, self.minimum[0], 1)
        dest_h = max(dest_h, self.minimum[1], 1)
        return int(dest_h + 0.5), int(dest_w + 0.5)

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        h, w = img.shape[:2]
        for _ in range(_RESIZE_TRIES):
            new_h, new_w = self._draw_size(h, w)
            if self.aspect_ratio_thres == 0:
                break
            old_ratio, new_ratio = w / h, new_w / new_h
            if abs(new_ratio - old_ratio) / old_ratio < self.aspect_ratio_thres + 1e-5:
                break
        else:
            logger.warning(
                "RandomResize found no size within the aspect ratio threshold in %d tries; keeping %dx%d",
                _RESIZE_TRIES,
                h,
                w,
            )
            new_h, new_w = h, w
        return ResizeTransform(h, w, new_h, new_w, self.interp)


def _range_kind(value: Any, name: str) -> bool:
    """True for a pair of floats, False for a pair of ints; ValueError otherwise."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ValueError(f"{name} must be a (low, high) pair, got {value!r}")
    is_float = [isinstance(v, (float, np.floating)) for v in value]
    if is_float[0] != is_float[1]:
        raise ValueError(f"{name} must hold two floats (scale factors) or two ints (pixels), got {value!r}")
    return is_float[0]


class Transpose(ImageAugmentor):
    """Swap rows and columns (HxW becomes WxH) with probability ``prob``."""

    draws_from_shape = True

    def __init__(self, prob: float = 0.5) -> None:
        super().__init__()
        self._init(locals())

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        if self.rng.rand() < self.prob:
            return TransposeTransform()
        return NoOpTransform()
