"""Deprecated elastic deformation: anchor points moved at random drag the pixels near them.

Kept for old scripts (not exported from ``imgaug``). Unlike the reference's sampler, which handled
three channels only, this one takes HxW and HxWxC images of any channel count. It is slow.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from .base import ImageAugmentor, shape2d
from .transform import BaseTransform, TransformFactory

__all__: list[str] = []

logger = logging.getLogger(__name__)


class GaussianMap:
    """Gaussian weights ``exp(-d^2 / sigma)`` over an image, ``d`` measured in image-size units."""

    def __init__(self, image_shape: Any, sigma: float = 0.5) -> None:
        self.shape = shape2d(image_shape, "GaussianMap image_shape")
        self.sigma = sigma

    def get_gaussian_weight(self, anchor: Any) -> np.ndarray:
        """An HxW float32 map peaking at ``anchor`` = (y, x) in [0, 1]."""
        h, w = self.shape
        y = np.arange(h, dtype=np.float32)[:, None] / h - anchor[0]
        x = np.arange(w, dtype=np.float32)[None, :] / w - anchor[1]
        return np.exp(-(x**2 + y**2) / self.sigma).astype(np.float32)


def np_sample(img: np.ndarray, coords: np.ndarray) -> np.ndarray:
    """Bilinear samples of ``img`` at ``coords`` (HxWx2 of (y, x)), clamped to the image; float32."""
    h, w = img.shape[:2]
    y = np.clip(coords[..., 0], 0, h - 1)
    x = np.clip(coords[..., 1], 0, w - 1)
    y0 = np.floor(y).astype(np.int32)
    x0 = np.floor(x).astype(np.int32)
    y1 = np.minimum(y0 + 1, h - 1)
    x1 = np.minimum(x0 + 1, w - 1)
    fy, fx = (y - y0).astype(np.float32), (x - x0).astype(np.float32)
    if img.ndim == 3:
        fy, fx = fy[..., None], fx[..., None]
    src = img.astype(np.float32, copy=False)
    top = src[y0, x0] * (1 - fx) + src[y0, x1] * fx
    bottom = src[y1, x0] * (1 - fx) + src[y1, x1] * fx
    return top * (1 - fy) + bottom * fy


class GaussianDeform(ImageAugmentor):
    """Move each anchor ((y, x) in [0, 1]) by up to ``randrange`` pixels; pixels follow by Gaussian weights.

    ``shape`` (h, w) is fixed when the augmentor is made; ``randrange`` defaults to h / 8. The output
    is float32; coordinates are not supported.
    """

    def __init__(self, anchors: Any, shape: Any, sigma: float = 0.5, randrange: float | None = None) -> None:
        super().__init__()
        logger.warning("GaussianDeform is deprecated and slow; run it in several worker processes")
        shape = shape2d(shape, "GaussianDeform shape")
        self._init(locals())
        h, w = shape
        self._grid = np.stack(np.mgrid[0:h, 0:w], axis=-1).astype(np.float32)  # HxWx2 of (y, x)
        gmap = GaussianMap(shape, sigma)
        self._weights = np.stack([gmap.get_gaussian_weight(a) for a in anchors], axis=-1)  # HxWxK
        self._range = h / 8 if randrange is None else randrange

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        moves = (self.rng.rand(len(self.anchors), 2).astype(np.float32) - 0.5) * (2 * self._range)
        return TransformFactory(name="GaussianDeform", apply_image=lambda im: self._deform(im, moves))

    def _deform(self, img: np.ndarray, moves: np.ndarray) -> np.ndarray:
        if img.shape[:2] != self.shape:
            h, w = self.shape
            raise ValueError(f"GaussianDeform was made for {h}x{w} images, got shape {img.shape}")
        return np_sample(img, self._grid + self._weights @ moves)
