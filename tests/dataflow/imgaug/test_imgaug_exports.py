"""The package exports the reference's 53 imgaug names, and importing it never loads TensorFlow."""

from __future__ import annotations

import subprocess
import sys

import pytest

import towerpack.dataflow.imgaug as imgaug

REFERENCE_EXPORTS = {
    "base": ["Augmentor", "ImageAugmentor", "AugmentorList", "PhotometricAugmentor"],
    "convert": ["ColorSpace", "Grayscale", "ToUint8", "ToFloat32"],
    "crop": [
        "RandomCrop",
        "CenterCrop",
        "RandomCropRandomShape",
        "GoogleNetRandomCropAndResize",
        "RandomCutout",
    ],
    "deform": [],
    "external": ["IAAugmentor", "Albumentations"],
    "geometry": ["Shift", "Rotation", "RotationAndCropValid", "Affine"],
    "imgproc": [
        "Hue",
        "Brightness",
        "BrightnessScale",
        "Contrast",
        "MeanVarianceNormalize",
        "GaussianBlur",
        "Gamma",
        "Clip",
        "Saturation",
        "Lighting",
        "MinMaxNormalize",
    ],
    "meta": ["RandomChooseAug", "MapImage", "Identity", "RandomApplyAug", "RandomOrderAug"],
    "misc": ["Flip", "Resize", "RandomResize", "ResizeShortestEdge", "Transpose"],
    "noise": ["JpegNoise", "GaussianNoise", "SaltPepperNoise"],
    "paste": ["CenterPaste", "BackgroundFiller", "ConstantBackgroundFiller", "RandomPaste"],
    "transform": [
        "Transform",
        "ResizeTransform",
        "CropTransform",
        "FlipTransform",
        "TransformList",
        "TransformFactory",
    ],
}


def test_exports_match_the_reference():
    expected = {name for names in REFERENCE_EXPORTS.values() for name in names}
    assert len(expected) == 53
    assert set(imgaug.__all__) == expected
    for module, names in REFERENCE_EXPORTS.items():
        sub = __import__(f"towerpack.dataflow.imgaug.{module}", fromlist=["__all__"])
        assert sorted(sub.__all__) == sorted(names), module
        for name in names:
            assert getattr(imgaug, name) is getattr(sub, name)


def test_unexported_names_stay_importable():
    from towerpack.dataflow.imgaug.base import ImagePlaceholder, TransformAugmentorBase
    from towerpack.dataflow.imgaug.deform import GaussianDeform
    from towerpack.dataflow.imgaug.transform import LazyTransform, WarpAffineTransform

    assert ImagePlaceholder(shape=(1, 2)).shape == (1, 2)
    assert TransformAugmentorBase is imgaug.ImageAugmentor
    assert GaussianDeform and LazyTransform and WarpAffineTransform


@pytest.mark.timeout(60)
def test_import_does_not_load_tensorflow():
    code = "import sys, towerpack.dataflow.imgaug; sys.exit('tensorflow' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=50).returncode == 0
