"""Adapters for augmenters of other libraries: aleju/imgaug (``IAAugmentor``) and albumentations.

The libraries are imported only when an adapter is made. They draw from their own random
generators, which ``reset_state()`` does not reseed.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import numpy as np

from .base import ImageAugmentor
from .transform import BaseTransform, Transform, as_coords

__all__ = ["Albumentations", "IAAugmentor"]


def _require(module: str, package: str, who: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"{who} needs the '{package}' package: pip install {package}") from e


class IAATransform(Transform):
    """One frozen draw of an imgaug augmenter, for an image of ``img_shape``."""

    def __init__(self, aug: Any, img_shape: tuple[int, ...]) -> None:
        self._init(locals())

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        return self.aug.augment_image(img)

    def apply_coords(self, coords: np.ndarray) -> np.ndarray:
        iaa = _require("imgaug", "imgaug", "IAAugmentor")
        coords = as_coords(coords)
        points = [iaa.Keypoint(x=float(x), y=float(y)) for x, y in coords]
        moved = self.aug.augment_keypoints([iaa.KeypointsOnImage(points, shape=self.img_shape)])[0]
        return np.asarray([[p.x, p.y] for p in moved.keypoints], dtype=coords.dtype).reshape(-1, 2)


class IAAugmentor(ImageAugmentor):
    """Use an ``imgaug`` augmenter (aleju/imgaug) as an augmentor.

    imgaug expects uint8 images and shape-preserving augmenters; its keypoint results (our
    coordinates) can be off by a fraction of a pixel.
    """

    def __init__(self, augmentor: Any) -> None:
        super().__init__()
        _require("imgaug", "imgaug", "IAAugmentor")
        self._init(locals())

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        return IAATransform(self.augmentor.to_deterministic(), img.shape)


class AlbumentationsTransform(Transform):
    """One frozen draw of an albumentations transform."""

    def __init__(self, aug: Any, param: dict[str, Any]) -> None:
        self._init(locals())

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        return self.aug.apply(img, **self.param)


class Albumentations(ImageAugmentor):
    """Use an ``albumentations`` transform as an augmentor: images only, always applied (``p`` ignored)."""

    def __init__(self, augmentor: Any) -> None:
        super().__init__()
        _require("albumentations", "albumentations", "Albumentations")
        self._init(locals())

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        return AlbumentationsTransform(self.augmentor, self.augmentor.get_params())
