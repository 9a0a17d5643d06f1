"""Noise augmentors: JPEG compression artefacts, additive Gaussian noise, salt-and-pepper noise.

Parameters are drawn as the reference draws them, so a seeded ``rng`` gives its results. Coordinates
pass through unchanged and the caller's image is never modified.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from .base import PhotometricAugmentor
from .pixels import PIXEL_MAX, finish, require_image
from .transform import keep_channel_axis

__all__ = ["GaussianNoise", "JpegNoise", "SaltPepperNoise"]


class JpegNoise(PhotometricAugmentor):
    """Encode as JPEG with a quality drawn from [quality_range[0], quality_range[1]) and decode again.

    Grey images (HxW, HxWx1) stay grey; the reference returned them as 3-channel BGR.
    JPEG is 8-bit: other input is rounded and clipped to uint8 [0, 255] first (as cv2 silently did in
    the reference) and the result cast back, so float images must hold [0, 255] values.
    """

    def __init__(self, quality_range: tuple[int, int] = (40, 100)) -> None:
        super().__init__()
        low, high = quality_range
        if not 0 <= low < high <= 101:
            raise ValueError(
                "JpegNoise needs quality_range=(low, high) with 0 <= low < high <= 101, "
                f"got {quality_range!r}"
            )
        self._init(locals())

    def _get_augment_params(self, _: np.ndarray) -> int:
        return int(self.rng.randint(*self.quality_range))

    def _augment(self, img: np.ndarray, quality: Any) -> np.ndarray:
        require_image(img, "JpegNoise", channels=(1, 3))
        pixels = img
        if img.dtype != np.uint8:
            pixels = np.rint(np.clip(img, 0, PIXEL_MAX)).astype(np.uint8)
        ok, encoded = cv2.imencode(".jpg", pixels, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
        if not ok:
            raise ValueError(f"JpegNoise: cv2 could not encode an image of shape {img.shape} as JPEG")
        out = cv2.imdecode(encoded, cv2.IMREAD_UNCHANGED)
        return keep_channel_axis(out, img).astype(img.dtype, copy=False)


class GaussianNoise(PhotometricAugmentor):
    """Add ``sigma * N(0, 1)`` noise, drawn independently per element, then apply the clip rule."""

    def __init__(self, sigma: float = 1, clip: bool = True) -> None:
        super().__init__()
        self._init(locals())

    def _get_augment_params(self, img: np.ndarray) -> np.ndarray:
        return self.rng.randn(*img.shape)

    def _augment(self, img: np.ndarray, noise: np.ndarray) -> np.ndarray:
        if noise.shape != img.shape:
            raise ValueError(
                f"GaussianNoise: noise of shape {noise.shape} drawn for another image, got {img.shape}"
            )
        out = noise * self.sigma
        out += img
        return finish(out, img.dtype, self.clip)


class SaltPepperNoise(PhotometricAugmentor):
    """Set each element (channels independently) to 255 with probability ``white_prob`` and to 0 with
    probability ``black_prob``.

    White is 255 whatever the dtype, as in the reference (scale [0, 1] floats afterwards). The
    reference changed its input in place; this returns a new array.
    """

    def __init__(self, white_prob: float = 0.05, black_prob: float = 0.05) -> None:
        super().__init__()
        if white_prob < 0 or black_prob < 0 or white_prob + black_prob > 1:
            raise ValueError(
                "SaltPepperNoise needs probabilities >= 0 that sum to at most 1, "
                f"got white_prob={white_prob!r}, black_prob={black_prob!r}"
            )
        self._init(locals())

    def _get_augment_params(self, img: np.ndarray) -> np.ndarray:
        return self.rng.uniform(low=0, high=1, size=img.shape)

    def _augment(self, img: np.ndarray, draws: np.ndarray) -> np.ndarray:
        if draws.shape != img.shape:
            raise ValueError(
                f"SaltPepperNoise: draws of shape {draws.shape} were made for another image, got {img.shape}"
            )
        out = img.copy()
        out[draws > 1 - self.white_prob] = PIXEL_MAX
        out[draws < self.black_prob] = 0
        return out
