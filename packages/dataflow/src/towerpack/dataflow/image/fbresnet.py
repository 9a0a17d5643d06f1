"""fbresnet_augmentor: the ImageNet augmentation of fb.resnet.torch, for BGR uint8 images.

Training: a random crop of 8-100% of the area and aspect ratio 3/4-4/3 resized to 224x224, then
brightness, contrast, saturation and PCA lighting noise in a random order (in float32, rounded
back to uint8 once), then a random horizontal flip, as tensorpack 0.11's ``imagenet_utils``.
Validation: the shorter side resized to 256, then the central 224x224. Bicubic interpolation
throughout, as the reference keeps it for models trained with it. Images in and out are uint8.

The list is the reference's, unchanged; the four colour augmentors between ``ToFloat32`` and
``ToUint8`` run as one colour matrix per image (:mod:`.imgaug.colour_matrix`, which says where
that differs from clipping after each of them and how to ask for the step-by-step path).
"""

from __future__ import annotations

import cv2
import numpy as np

from ..imgaug.base import ImageAugmentor
from ..imgaug.convert import ToFloat32, ToUint8
from ..imgaug.crop import CenterCrop, GoogleNetRandomCropAndResize
from ..imgaug.imgproc import BrightnessScale, Contrast, Lighting, Saturation
from ..imgaug.meta import RandomOrderAug
from ..imgaug.misc import Flip, ResizeShortestEdge

__all__ = ["fbresnet_augmentor"]

# fb.resnet.torch's PCA of ImageNet pixel colours, in RGB; reversed below for BGR images.
_EIGVAL_RGB = np.asarray([0.2175, 0.0188, 0.0045])
_EIGVEC_RGB = np.array(
    [[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140], [-0.5836, -0.6948, 0.4203]], dtype="float32"
)


def fbresnet_augmentor(is_train: bool) -> list[ImageAugmentor]:
    """The augmentors of the reference's ImageNet examples: training (``is_train``) or validation."""
    if not is_train:
        return [ResizeShortestEdge(256, cv2.INTER_CUBIC), CenterCrop((224, 224))]
    colour = RandomOrderAug(
        [
            BrightnessScale((0.6, 1.4)),
            Contrast((0.6, 1.4), rgb=False),
            Saturation(0.4, rgb=False),
            Lighting(0.1, eigval=_EIGVAL_RGB[::-1] * 255.0, eigvec=_EIGVEC_RGB[::-1, ::-1]),
        ]
    )
    crop = GoogleNetRandomCropAndResize(interp=cv2.INTER_CUBIC)
    return [crop, ToFloat32(), colour, ToUint8(), Flip(horiz=True)]
