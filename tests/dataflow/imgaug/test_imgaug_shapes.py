"""Every augmentor of this package on HxW, HxWx1 and HxWx3 images, uint8 and float32: shape and dtype kept."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from towerpack.dataflow.imgaug.base import AugmentorList
from towerpack.dataflow.imgaug.crop import (
    CenterCrop,
    GoogleNetRandomCropAndResize,
    RandomCrop,
    RandomCropRandomShape,
    RandomCutout,
)
from towerpack.dataflow.imgaug.geometry import Affine, Rotation, RotationAndCropValid, Shift
from towerpack.dataflow.imgaug.meta import Identity, MapImage, RandomApplyAug, RandomChooseAug, RandomOrderAug
from towerpack.dataflow.imgaug.misc import Flip, RandomResize, Resize, ResizeShortestEdge, Transpose
from towerpack.dataflow.imgaug.paste import CenterPaste, RandomPaste

H, W = 20, 26

# (factory, expected (h, w) of the output or None when it varies)
CASES = {
    "Flip": (lambda: Flip(horiz=True, prob=1.0), (H, W)),
    "FlipVert": (lambda: Flip(vert=True, prob=1.0), (H, W)),
    "Resize": (lambda: Resize((31, 17)), (31, 17)),
    "ResizeCubic": (lambda: Resize(12, cv2.INTER_CUBIC), (12, 12)),
    "RandomResize": (lambda: RandomResize((0.5, 1.5)), None),
    "RandomResizePixels": (lambda: RandomResize((10, 40), (10, 40), aspect_ratio_thres=0.5), None),
    "ResizeShortestEdge": (lambda: ResizeShortestEdge(10), (10, 13)),
    "Transpose": (lambda: Transpose(prob=1.0), (W, H)),
    "RandomCrop": (lambda: RandomCrop((9, 11)), (9, 11)),
    "CenterCrop": (lambda: CenterCrop(7), (7, 7)),
    "RandomCropRandomShape": (lambda: RandomCropRandomShape(3, 4), None),
    "GoogleNetRandomCropAndResize": (lambda: GoogleNetRandomCropAndResize(target_shape=16), (16, 16)),
    "RandomCutout": (lambda: RandomCutout((2, 6), (3, 5)), (H, W)),
    "Shift": (lambda: Shift(0.3, 0.3), (H, W)),
    "Rotation": (lambda: Rotation(45), (H, W)),
    "RotationAndCropValid": (lambda: RotationAndCropValid(30), None),
    "Affine": (lambda: Affine((0.8, 1.2), (0.1, 0.1), 20, 10), (H, W)),
    "Identity": (Identity, (H, W)),
    "RandomApplyAug": (lambda: RandomApplyAug(Rotation(10), 0.5), (H, W)),
    "RandomChooseAug": (lambda: RandomChooseAug([Flip(horiz=True), Shift(0.1)]), (H, W)),
    "RandomOrderAug": (lambda: RandomOrderAug([Flip(horiz=True), Rotation(10), RandomCutout(2, 2)]), (H, W)),
    "MapImage": (lambda: MapImage(lambda x: x[::-1]), (H, W)),
    "CenterPaste": (lambda: CenterPaste((30, 40)), (30, 40)),
    "RandomPaste": (lambda: RandomPaste((30, 40)), (30, 40)),
    "AugmentorList": (lambda: AugmentorList([RandomCrop(16), Resize(8), Flip(vert=True)]), (8, 8)),
}


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("channels", [None, 1, 3])
@pytest.mark.parametrize("name", sorted(CASES))
def test_shape_and_dtype(name, channels, dtype):
    factory, expected = CASES[name]
    aug = factory()
    shape = (H, W) if channels is None else (H, W, channels)
    img = (np.random.RandomState(1).rand(*shape) * 255).astype(dtype)
    for _ in range(3):
        out = aug.augment(img.copy())
        assert out.dtype == dtype
        assert out.shape[2:] == shape[2:], f"{name} changed the channel axes: {shape} -> {out.shape}"
        if expected is not None:
            assert out.shape[:2] == expected
        assert out.shape[0] >= 1 and out.shape[1] >= 1
