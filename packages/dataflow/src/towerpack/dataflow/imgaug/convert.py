"""Colour-space and dtype conversions: ColorSpace, Grayscale, ToUint8, ToFloat32.

``ColorSpace`` fixes a reference bug: converting an HxW grey image to colour gave HxWx3x1; here an
axis is appended only when the conversion dropped the channel axis.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from .base import PhotometricAugmentor
from .colour_matrix import CastTransform
from .pixels import PIXEL_MAX, require_image
from .transform import BaseTransform

__all__ = ["ColorSpace", "Grayscale", "ToFloat32", "ToUint8"]

_UINT8, _FLOAT32 = np.dtype(np.uint8), np.dtype(np.float32)


class ColorSpace(PhotometricAugmentor):
    """Convert with ``cv2.cvtColor(img, mode)``; ``keepdims`` keeps an HxWx1 result when the channel
    axis would be dropped (e.g. colour to grey)."""

    def __init__(self, mode: int, keepdims: bool = True) -> None:
        super().__init__()
        self._init(locals())

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        require_image(img, type(self).__name__)
        try:
            out = cv2.cvtColor(img, self.mode)
        except cv2.error as e:
            reason = (getattr(e, "err", "") or str(e)).strip().splitlines()[0].lstrip("> ").rstrip(":")
            raise ValueError(
                f"{type(self).__name__}: cv2 cannot convert (mode {self.mode}) an image of shape "
                f"{img.shape} and dtype {img.dtype}: {reason}"
            ) from e
        if self.keepdims and out.ndim < img.ndim:
            out = out[:, :, np.newaxis]
        return out


class Grayscale(ColorSpace):
    """Convert BGR (or RGB with ``rgb=True``) to grey: HxWx1 with ``keepdims``, HxW without;
    ``keepshape`` repeats the grey channel to give HxWx3."""

    def __init__(self, keepdims: bool = True, rgb: bool = False, keepshape: bool = False) -> None:
        if keepshape and not keepdims:
            raise ValueError("Grayscale(keepshape=True) needs keepdims=True")
        super().__init__(cv2.COLOR_RGB2GRAY if rgb else cv2.COLOR_BGR2GRAY, keepdims)
        self._init(locals())

    def _augment(self, img: np.ndarray, params: Any) -> np.ndarray:
        require_image(img, type(self).__name__, channels=(3,))
        out = super()._augment(img, params)
        if self.keepshape:
            out = np.repeat(out, 3, axis=2)
        return out


class ToUint8(PhotometricAugmentor):
    """Clip to [0, 255] and cast to uint8 (truncating)."""

    colour_affine = True  # a colour run can end with it

    def __init__(self) -> None:
        super().__init__()

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        return CastTransform(lambda im: self._augment(im, None), _UINT8)

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        if img.dtype == np.uint8:
            return img.copy()
        return np.clip(img, 0, PIXEL_MAX).astype(np.uint8)


class ToFloat32(PhotometricAugmentor):
    """Cast to float32 (always a new array, so later augmentors may work on it in place)."""

    colour_affine = True  # a colour run can start with it

    def __init__(self) -> None:
        super().__init__()

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        return CastTransform(lambda im: self._augment(im, None), _FLOAT32)

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        return img.astype(np.float32)
