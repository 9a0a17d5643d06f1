"""Crop augmentors: fixed, centred, random-shaped, the GoogLeNet/ResNet crop, and cutout.

Two reference bugs are fixed here: ``RandomCropRandomShape`` can pick every offset (the reference
never picked the last one), and ``RandomCutout`` draws sizes from ``(low, high)`` ranges (the
reference passed the tuple to ``randint`` and broke).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import cv2
import numpy as np

from .base import ImageAugmentor, ImagePlaceholder, shape2d
from .misc import ResizeShortestEdge
from .transform import BaseTransform, CropTransform, PhotometricTransform, ResizeTransform, TransformList

__all__ = [
    "CenterCrop",
    "GoogleNetRandomCropAndResize",
    "RandomCrop",
    "RandomCropRandomShape",
    "RandomCutout",
]

logger = logging.getLogger(__name__)


def _check_fits(img_shape: tuple[int, ...], crop_h: int, crop_w: int, who: str) -> tuple[int, int]:
    """``(H - crop_h, W - crop_w)``, or ValueError when the crop is larger than the image."""
    h, w = img_shape[:2]
    if crop_h > h or crop_w > w:
        raise ValueError(f"{who}: crop {crop_h}x{crop_w} is larger than the image {h}x{w}")
    return h - crop_h, w - crop_w


class RandomCrop(ImageAugmentor):
    """Crop a ``crop_shape`` window (an int or ``(h, w)``) at a uniformly random position."""

    draws_from_shape = True

    def __init__(self, crop_shape: Any) -> None:
        super().__init__()
        crop_shape = shape2d(crop_shape, "RandomCrop crop_shape")
        self._init(locals())

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        ch, cw = self.crop_shape
        dh, dw = _check_fits(img.shape, ch, cw, "RandomCrop")
        y0 = self.rng.randint(dh + 1)
        x0 = self.rng.randint(dw + 1)
        return CropTransform(y0, x0, ch, cw)


class CenterCrop(ImageAugmentor):
    """Crop a ``crop_shape`` window (an int or ``(h, w)``) from the centre."""

    draws_from_shape = True

    def __init__(self, crop_shape: Any) -> None:
        super().__init__()
        crop_shape = shape2d(crop_shape, "CenterCrop crop_shape")
        self._init(locals())

    def get_transform(self, img: Any) -> BaseTransform:
        ch, cw = self.crop_shape
        dh, dw = _check_fits(img.shape, ch, cw, "CenterCrop")
        return CropTransform(dh // 2, dw // 2, ch, cw)


class RandomCropRandomShape(ImageAugmentor):
    """Crop a window of random size: height in ``[hmin, hmax]``, width in ``[wmin, wmax]`` (inclusive).

    ``hmax``/``wmax`` default to (and are capped at) the image size. ``max_aspect_ratio`` is
    deprecated and ignored, as in the reference.
    """

    draws_from_shape = True

    def __init__(
        self,
        wmin: int,
        hmin: int,
        wmax: int | None = None,
        hmax: int | None = None,
        max_aspect_ratio: float | None = None,
    ) -> None:
        super().__init__()
        if max_aspect_ratio is not None:
            logger.warning("RandomCropRandomShape(max_aspect_ratio=...) is deprecated and has no effect")
        if wmin < 1 or hmin < 1:
            raise ValueError(f"RandomCropRandomShape needs wmin, hmin >= 1, got wmin={wmin}, hmin={hmin}")
        self._init(locals())

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        h, w = img.shape[:2]
        hmax = min(self.hmax or h, h)
        wmax = min(self.wmax or w, w)
        if self.hmin > hmax or self.wmin > wmax:
            raise ValueError(
                f"RandomCropRandomShape: minimum crop {self.hmin}x{self.wmin} does not fit "
                f"(at most {hmax}x{wmax} for an image of {h}x{w})"
            )
        ch = self.rng.randint(self.hmin, hmax + 1)
        cw = self.rng.randint(self.wmin, wmax + 1)
        y0 = self.rng.randint(h - ch + 1)
        x0 = self.rng.randint(w - cw + 1)
        return CropTransform(y0, x0, ch, cw)


class GoogleNetRandomCropAndResize(ImageAugmentor):
    """The Inception / fb.resnet.torch training crop: a random area and aspect ratio, resized to a square.

    Up to 10 tries draw an area fraction from ``crop_area_fraction`` and an aspect ratio from
    ``aspect_ratio_range`` (swapping width and height half the time); the first window that fits is
    cropped (a view) and resized to ``target_shape`` squared. If none fits, the image is resized so
    that its short side is ``target_shape`` and centre-cropped.
    """

    draws_from_shape = True

    def __init__(
        self,
        crop_area_fraction: tuple[float, float] = (0.08, 1.0),
        aspect_ratio_range: tuple[float, float] = (0.75, 1.333),
        target_shape: int = 224,
        interp: int = cv2.INTER_LINEAR,
    ) -> None:
        super().__init__()
        if not isinstance(target_shape, (int, np.integer)) or isinstance(target_shape, bool):
            raise ValueError(f"target_shape must be an int (the side of the square), got {target_shape!r}")
        self._init(locals())
        self._fallback_resize = ResizeShortestEdge(target_shape, interp)
        self._fallback_crop = CenterCrop(target_shape)

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        h, w = img.shape[:2]
        area = h * w
        for _ in range(10):
            target_area = float(self._rand_range(*self.crop_area_fraction)) * area
            ratio = float(self._rand_range(*self.aspect_ratio_range))
            ww = int(math.sqrt(target_area * ratio) + 0.5)
            hh = int(math.sqrt(target_area / ratio) + 0.5)
            if self._rand_range() < 0.5:
                ww, hh = hh, ww
            if 1 <= hh <= h and 1 <= ww <= w:
                y0 = self.rng.randint(h - hh + 1)
                x0 = self.rng.randint(w - ww + 1)
                size = self.target_shape
                resize = ResizeTransform(hh, ww, size, size, self.interp)
                return TransformList([CropTransform(y0, x0, hh, ww), resize])
        resize = self._fallback_resize.get_transform(img)
        shape = (resize.new_h, resize.new_w, *img.shape[2:])
        return TransformList([resize, self._fallback_crop.get_transform(ImagePlaceholder(shape=shape))])


def _size_range(spec: Any, name: str) -> tuple[int, int]:
    """``[low, high)`` of a cutout side: an int is a fixed size, a ``(low, high)`` pair a range."""
    if isinstance(spec, (int, np.integer)) and spec >= 1:
        return int(spec), int(spec) + 1
    if isinstance(spec, (list, tuple)) and len(spec) == 2:
        low, high = (int(v) for v in spec)
        if 1 <= low < high:
            return low, high
    raise ValueError(
        f"RandomCutout {name} must be an int >= 1 or a (low, high) pair with 1 <= low < high, got {spec!r}"
    )


class RandomCutout(ImageAugmentor):
    """Fill a random rectangle with ``fill``, in place (coordinates are unchanged).

    ``h_range``/``w_range``: an int for a fixed size, or ``(low, high)`` to draw from ``[low, high)``;
    sizes larger than the image are capped at it.
    """

    def __init__(self, h_range: Any, w_range: Any, fill: float = 0.0) -> None:
        super().__init__()
        self._init(locals())
        self._h_bounds = _size_range(h_range, "h_range")
        self._w_bounds = _size_range(w_range, "w_range")

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        h, w = img.shape[:2]
        hh = min(self.rng.randint(*self._h_bounds), h)
        ww = min(self.rng.randint(*self._w_bounds), w)
        y0 = self.rng.randint(h - hh + 1)
        x0 = self.rng.randint(w - ww + 1)
        return PhotometricTransform(lambda im: self._cutout(im, y0, x0, hh, ww), name="RandomCutout")

    def _cutout(self, img: np.ndarray, y0: int, x0: int, hh: int, ww: int) -> np.ndarray:
        img[y0 : y0 + hh, x0 : x0 + ww] = self.fill
        return img
