"""Paste the image onto a larger background canvas, at the centre or at a random place.

Unlike the reference, ``RandomPaste`` works before ``reset_state()`` (the reference had no
generator until then), the paste offset can be any of the valid ones, a canvas of the image's own
size is allowed, and coordinates are moved with the image (the reference left them unimplemented).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import ImageAugmentor, shape2d
from .transform import BaseTransform, Transform, as_coords

__all__ = ["BackgroundFiller", "CenterPaste", "ConstantBackgroundFiller", "RandomPaste"]


class BackgroundFiller:
    """Makes the canvas an image is pasted onto."""

    def fill(self, background_shape: Any, img: np.ndarray) -> np.ndarray:
        """A canvas of ``background_shape`` (h, w), with the channels and dtype of ``img``."""
        return self._fill(tuple(background_shape), img)

    def _fill(self, background_shape: tuple[int, int], img: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} must implement _fill(background_shape, img)")


class ConstantBackgroundFiller(BackgroundFiller):
    """A canvas filled with ``value``."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def _fill(self, background_shape: tuple[int, int], img: np.ndarray) -> np.ndarray:
        if img.ndim not in (2, 3):
            raise ValueError(f"an image must be HxW or HxWxC, got shape {img.shape}")
        canvas = np.empty(background_shape + img.shape[2:], dtype=img.dtype)
        canvas[...] = self.value
        return canvas


class PasteTransform(Transform):
    """Paste the image with its top-left corner at row ``y0``, column ``x0`` of a fresh canvas."""

    def __init__(self, background_shape: tuple[int, int], filler: BackgroundFiller, y0: int, x0: int) -> None:
        self._init(locals())

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        h, w = img.shape[:2]
        canvas = self.filler.fill(self.background_shape, img)
        canvas[self.y0 : self.y0 + h, self.x0 : self.x0 + w] = img
        return canvas

    def apply_coords(self, coords: np.ndarray) -> np.ndarray:
        coords = as_coords(coords)
        coords[:, 0] += self.x0
        coords[:, 1] += self.y0
        return coords


class CenterPaste(ImageAugmentor):
    """Paste the image at the centre of a ``background_shape`` canvas (default filler: zeros)."""

    def __init__(self, background_shape: Any, background_filler: BackgroundFiller | None = None) -> None:
        super().__init__()
        background_shape = shape2d(background_shape, f"{type(self).__name__} background_shape")
        self._init(locals())
        self._filler = background_filler or ConstantBackgroundFiller(0)

    def _room(self, img: np.ndarray) -> tuple[int, int]:
        bh, bw = self.background_shape
        h, w = img.shape[:2]
        if h > bh or w > bw:
            raise ValueError(f"{type(self).__name__}: image {h}x{w} is larger than the background {bh}x{bw}")
        return bh - h, bw - w

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        dh, dw = self._room(img)
        return PasteTransform(self.background_shape, self._filler, dh // 2, dw // 2)


class RandomPaste(CenterPaste):
    """Paste the image at a uniformly random place on a ``background_shape`` canvas."""

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        dh, dw = self._room(img)
        y0, x0 = self.rng.randint(dh + 1), self.rng.randint(dw + 1)
        return PasteTransform(self.background_shape, self._filler, y0, x0)
