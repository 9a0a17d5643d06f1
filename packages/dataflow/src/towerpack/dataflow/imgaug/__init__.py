"""Image augmentors (``tensorpack.dataflow.imgaug``'s API): draw random parameters, apply a transform.

An augmentor's ``get_transform(img)`` draws its random parameters from ``img`` and returns a
deterministic transform, which applies the same change to the image (``apply_image``), to
coordinates (``apply_coords``) or to masks. ``augment(img)`` does both at once. Submodules hold
one family each; less common names (``WarpAffineTransform``, ``GaussianDeform``, ...) are imported
from their submodule. Read :mod:`.base` (the augmentor protocol) and :mod:`.transform` first.
"""

from __future__ import annotations

from .base import Augmentor, AugmentorList, ImageAugmentor, PhotometricAugmentor
from .convert import ColorSpace, Grayscale, ToFloat32, ToUint8
from .crop import CenterCrop, GoogleNetRandomCropAndResize, RandomCrop, RandomCropRandomShape, RandomCutout
from .external import Albumentations, IAAugmentor
from .geometry import Affine, Rotation, RotationAndCropValid, Shift
from .imgproc import (
    Brightness,
    BrightnessScale,
    Clip,
    Contrast,
    Gamma,
    GaussianBlur,
    Hue,
    Lighting,
    MeanVarianceNormalize,
    MinMaxNormalize,
    Saturation,
)
from .meta import Identity, MapImage, RandomApplyAug, RandomChooseAug, RandomOrderAug
from .misc import Flip, RandomResize, Resize, ResizeShortestEdge, Transpose
from .noise import GaussianNoise, JpegNoise, SaltPepperNoise
from .paste import BackgroundFiller, CenterPaste, ConstantBackgroundFiller, RandomPaste
from .transform import (
    CropTransform,
    FlipTransform,
    ResizeTransform,
    Transform,
    TransformFactory,
    TransformList,
)

__all__ = [
    "Affine",
    "Albumentations",
    "Augmentor",
    "AugmentorList",
    "BackgroundFiller",
    "Brightness",
    "BrightnessScale",
    "CenterCrop",
    "CenterPaste",
    "Clip",
    "ColorSpace",
    "ConstantBackgroundFiller",
    "Contrast",
    "CropTransform",
    "Flip",
    "FlipTransform",
    "Gamma",
    "GaussianBlur",
    "GaussianNoise",
    "GoogleNetRandomCropAndResize",
    "Grayscale",
    "Hue",
    "IAAugmentor",
    "Identity",
    "ImageAugmentor",
    "JpegNoise",
    "Lighting",
    "MapImage",
    "MeanVarianceNormalize",
    "MinMaxNormalize",
    "PhotometricAugmentor",
    "RandomApplyAug",
    "RandomChooseAug",
    "RandomCrop",
    "RandomCropRandomShape",
    "RandomCutout",
    "RandomOrderAug",
    "RandomPaste",
    "RandomResize",
    "Resize",
    "ResizeShortestEdge",
    "ResizeTransform",
    "Rotation",
    "RotationAndCropValid",
    "SaltPepperNoise",
    "Saturation",
    "Shift",
    "ToFloat32",
    "ToUint8",
    "Transform",
    "TransformFactory",
    "TransformList",
    "Transpose",
]
