"""Affine-warp augmentors: shift, rotation (with or without cropping the valid part), general affine.

All warp with ``cv2.warpAffine`` into an image of the input's size (``RotationAndCropValid`` then
crops). cv2 puts pixel centres at integer coordinates, so the image centre is ``(W/2 - 0.5,
H/2 - 0.5)``; coordinates go through the same matrix.
"""

from __future__ import annotations

import math
from typing import Any

import cv2
import numpy as np

from .base import ImageAugmentor
from .transform import BaseTransform, CropTransform, TransformList, WarpAffineTransform

__all__ = ["Affine", "Rotation", "RotationAndCropValid", "Shift"]


def _check_step(max_deg: float, step_deg: float | None) -> None:
    if step_deg is not None and not (max_deg == 180 and step_deg > 0 and 180 % step_deg == 0):
        raise ValueError(
            f"step_deg needs max_deg == 180 and a divisor of 180, got max_deg={max_deg}, step_deg={step_deg}"
        )


def _pair(value: Any, name: str) -> tuple[float, float] | None:
    if value is None:
        return None
    if not isinstance(value, tuple) or len(value) != 2:
        raise ValueError(f"Affine {name} must be a tuple of two floats (a, b), got {value!r}")
    return value


class Shift(ImageAugmentor):
    """Translate by up to ``horiz_frac`` of the width and ``vert_frac`` of the height (whole pixels)."""

    def __init__(
        self,
        horiz_frac: float = 0,
        vert_frac: float = 0,
        border: int = cv2.BORDER_REPLICATE,
        border_value: Any = 0,
    ) -> None:
        super().__init__()
        if not (0 <= horiz_frac < 1 and 0 <= vert_frac < 1):
            raise ValueError(f"Shift fractions must be in [0, 1), got horiz={horiz_frac}, vert={vert_frac}")
        self._init(locals())

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        h, w = img.shape[:2]
        max_dx, max_dy = self.horiz_frac * w, self.vert_frac * h
        dx = np.round(self._rand_range(-max_dx, max_dx))
        dy = np.round(self._rand_range(-max_dy, max_dy))
        mat = np.array([[1, 0, dx], [0, 1, dy]], dtype=np.float32)
        return WarpAffineTransform(mat, (w, h), borderMode=self.border, borderValue=self.border_value)


class Rotation(ImageAugmentor):
    """Rotate by a random angle in ``[-max_deg, max_deg]`` about a random centre.

    The centre is drawn as a fraction in ``center_range`` of the width and of the height.
    ``step_deg`` rounds the angle down to a multiple of it (needs ``max_deg == 180``).
    """

    def __init__(
        self,
        max_deg: float,
        center_range: tuple[float, float] = (0, 1),
        interp: int = cv2.INTER_LINEAR,
        border: int = cv2.BORDER_REPLICATE,
        step_deg: float | None = None,
        border_value: Any = 0,
    ) -> None:
        super().__init__()
        _check_step(max_deg, step_deg)
        self._init(locals())

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        h, w = img.shape[:2]
        center = np.array([w, h]) * self._rand_range(*self.center_range, size=(2,)) - 0.5
        deg = self._rand_range(-self.max_deg, self.max_deg)
        if self.step_deg:
            deg = deg // self.step_deg * self.step_deg
        mat = cv2.getRotationMatrix2D((float(center[0]), float(center[1])), float(deg), 1.0)
        return WarpAffineTransform(
            mat, (w, h), interp=self.interp, borderMode=self.border, borderValue=self.border_value
        )


class RotationAndCropValid(ImageAugmentor):
    """Rotate about the centre, then crop the largest upright rectangle with no border in it.

    The output shape varies with the angle. Arguments as in :class:`Rotation`.
    """

    def __init__(self, max_deg: float, interp: int = cv2.INTER_LINEAR, step_deg: float | None = None) -> None:
        super().__init__()
        _check_step(max_deg, step_deg)
        self._init(locals())

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        h, w = img.shape[:2]
        deg = float(self._rand_range(-self.max_deg, self.max_deg))
        if self.step_deg:
            deg = deg // self.step_deg * self.step_deg
        cx, cy = w * 0.5, h * 0.5
        mat = cv2.getRotationMatrix2D((cx - 0.5, cy - 0.5), deg, 1.0)
        new_w, new_h = self.largest_rotated_rect(w, h, deg)
        new_w, new_h = max(1, min(new_w, w)), max(1, min(new_h, h))
        crop = CropTransform(int(cy - new_h * 0.5), int(cx - new_w * 0.5), new_h, new_w)
        return TransformList([WarpAffineTransform(mat, (w, h), interp=self.interp), crop])

    @staticmethod
    def largest_rotated_rect(w: float, h: float, angle: float) -> tuple[int, int]:
        """``(width, height)`` of the largest upright rectangle inside ``w x h`` rotated by ``angle`` deg."""
        if w <= 0 or h <= 0:
            return 0, 0
        a = math.radians(angle)
        sin_a, cos_a = abs(math.sin(a)), abs(math.cos(a))
        long_side, short_side = max(w, h), min(w, h)
        if short_side <= 2.0 * sin_a * cos_a * long_side or abs(sin_a - cos_a) < 1e-10:
            # Two corners touch the long side; the rectangle's half-short-side is fixed.
            half = 0.5 * short_side
            if w >= h:
                rw, rh = half / sin_a, half / cos_a
            else:
                rw, rh = half / cos_a, half / sin_a
        else:
            # All four corners touch the rotated rectangle's sides.
            cos_2a = cos_a * cos_a - sin_a * sin_a
            rw, rh = (w * cos_a - h * sin_a) / cos_2a, (h * cos_a - w * sin_a) / cos_2a
        return round(rw), round(rh)


class Affine(ImageAugmentor):
    """A random affine warp about the image centre: scale, rotation, shear, then translation.

    ``scale=(a, b)`` draws the zoom in ``[a, b]``; ``translate_frac=(fx, fy)`` shifts by up to
    ``fx`` of the width and ``fy`` of the height either way (whole pixels); ``rotate_max_deg`` and
    ``shear`` (degrees, >= 0) are drawn in ``[-max, max]``.
    """

    def __init__(
        self,
        scale: tuple[float, float] | None = None,
        translate_frac: tuple[float, float] | None = None,
        rotate_max_deg: float = 0.0,
        shear: float = 0.0,
        interp: int = cv2.INTER_LINEAR,
        border: int = cv2.BORDER_REPLICATE,
        border_value: Any = 0,
    ) -> None:
        super().__init__()
        _pair(scale, "scale")
        _pair(translate_frac, "translate_frac")
        if not shear >= 0.0:
            raise ValueError(f"Affine shear must be in [0, 180] degrees, got {shear}")
        self._init(locals())

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        h, w = img.shape[:2]
        scale = 1.0 if self.scale is None else float(self._rand_range(*self.scale))
        dx = dy = 0.0
        if self.translate_frac is not None:
            max_dx, max_dy = self.translate_frac[0] * w, self.translate_frac[1] * h
            dx = float(np.round(self._rand_range(-max_dx, max_dx)))
            dy = float(np.round(self._rand_range(-max_dy, max_dy)))
        shear = float(self._rand_range(-self.shear, self.shear)) if self.shear > 0 else 0.0
        deg = float(self._rand_range(-self.rotate_max_deg, self.rotate_max_deg))
        center = np.array([w * 0.5 - 0.5, h * 0.5 - 0.5])
        mat = cv2.getRotationMatrix2D((float(center[0]), float(center[1])), deg, scale)
        if shear:
            # Shear the y axis by `shear` degrees, then move the centre back where it was.
            s = math.radians(shear)
            linear = mat[:, :2] @ np.array([[1.0, math.sin(s)], [0.0, math.cos(s)]])
            mat = np.hstack([linear, (center - linear @ center)[:, None]])
        mat[0, 2] += dx
        mat[1, 2] += dy
        return WarpAffineTransform(mat, (w, h), self.interp, self.border, self.border_value)
