"""Image data pipelines written as a tensorpack user's script writes them: CIFAR, ImageNet, detection.

Ours, in the style of the reference's example scripts: ``get_*`` functions that stack a dataset
reader, an imgaug augmentor list, batching and worker processes; a detection mapper that draws one
transform per image (a resize built on ``get_transform``, then a random flip) and applies it to the
image and to the corners of its boxes; and the same mapper in the older augmentor API
(``_get_augment_params`` returning a transform, ``augment_return_params``/``augment_coords``).
tests/integration/test_reference_style_image_pipelines.py checks what they deliver.
"""

from __future__ import annotations

import multiprocessing

import cv2
import numpy as np

from towerpack.dataflow import (
    AugmentImageComponent,
    BatchData,
    MultiProcessRunnerZMQ,
    MultiThreadMapData,
    PrefetchDataZMQ,
    dataset,
    imgaug,
)
from towerpack.dataflow.imgaug import transform

# ---- CIFAR: random crops and colour changes in worker processes -------------------------------

CIFAR_CROP = 30
CIFAR_BATCH = 40
CIFAR_WORKERS = 4


def get_cifar_data(split: str, classnum: int):
    """Normalised ``CIFAR_CROP`` crops with labels; training batches come from ``CIFAR_WORKERS`` workers."""
    is_train = split == "train"
    ds = dataset.Cifar10(split) if classnum == 10 else dataset.Cifar100(split)
    if is_train:
        augmentors = [
            imgaug.RandomCrop((CIFAR_CROP, CIFAR_CROP)),
            imgaug.Flip(horiz=True),
            imgaug.Brightness(40),
            imgaug.Contrast((0.6, 1.4)),
        ]
    else:
        augmentors = [imgaug.CenterCrop((CIFAR_CROP, CIFAR_CROP))]
    augmentors.append(imgaug.MeanVarianceNormalize(all_channel=True))
    ds = AugmentImageComponent(ds, augmentors)
    ds = BatchData(ds, CIFAR_BATCH, remainder=not is_train)
    return MultiProcessRunnerZMQ(ds, CIFAR_WORKERS) if is_train else ds


# ---- ImageNet: JPEG files decoded and augmented in workers -------------------------------------

IMAGENET_SIZE = 192
IMAGENET_VAL_SHORT_EDGE = 219  # the crop is 7/8 of the short edge


def imagenet_augmentors(is_train: bool) -> list:
    if not is_train:
        return [
            imgaug.ResizeShortestEdge(IMAGENET_VAL_SHORT_EDGE, interp=cv2.INTER_AREA),
            imgaug.CenterCrop((IMAGENET_SIZE, IMAGENET_SIZE)),
        ]
    colour = [
        imgaug.BrightnessScale((0.7, 1.3)),
        imgaug.Contrast((0.7, 1.3), rgb=False),
        imgaug.Saturation(0.3, rgb=False),
    ]
    return [
        imgaug.GoogleNetRandomCropAndResize(crop_area_fraction=(0.2, 1.0), target_shape=IMAGENET_SIZE),
        imgaug.RandomOrderAug(colour),
        imgaug.Flip(horiz=True),
    ]


def get_imagenet_dataflow(datadir: str, split: str, batch_size: int, parallel: int | None = None):
    """uint8 BGR batches of an ILSVRC12 directory: training shuffled and augmented in ``parallel``
    processes, other splits in their list's order, decoded by ``parallel`` threads."""
    if parallel is None:
        parallel = max(1, multiprocessing.cpu_count() // 2)
    augmentors = imagenet_augmentors(split == "train")
    if split == "train":
        ds = dataset.ILSVRC12(datadir, split, shuffle=True)
        ds = AugmentImageComponent(ds, augmentors, copy=False)
        ds = PrefetchDataZMQ(ds, parallel)
        return BatchData(ds, batch_size, remainder=False)

    augment = imgaug.AugmentorList(augmentors)

    def load(point):
        path, label = point
        return augment.augment(cv2.imread(path, cv2.IMREAD_COLOR)), label

    ds = dataset.ILSVRC12Files(datadir, split, shuffle=False)
    ds = MultiThreadMapData(ds, parallel, load, buffer_size=64, strict=True)
    ds = BatchData(ds, batch_size, remainder=True)
    return PrefetchDataZMQ(ds, 1)


# ---- detection: one transform moves the image and its boxes -----------------------------------


def box_corners(boxes: np.ndarray) -> np.ndarray:
    """``(n, 4)`` x1y1x2y2 boxes -> ``(4n, 2)`` points: each box's four corners."""
    x1, y1, x2, y2 = (boxes[:, k] for k in range(4))
    corners = [(x1, y1), (x2, y1), (x2, y2), (x1, y2)]
    return np.stack([np.stack(c, axis=1) for c in corners], axis=1).reshape(-1, 2)


def enclosing_boxes(points: np.ndarray) -> np.ndarray:
    """``(4n, 2)`` points -> the ``(n, 4)`` x1y1x2y2 boxes around each group of four."""
    groups = points.reshape(-1, 4, 2)
    return np.concatenate([groups.min(axis=1), groups.max(axis=1)], axis=1)


def _resized_shape(h: int, w: int, short_edge: int, max_size: int) -> tuple[int, int]:
    """The short edge at ``short_edge``, unless the long edge would pass ``max_size``."""
    scale = min(short_edge / min(h, w), max_size / max(h, w))
    return int(h * scale + 0.5), int(w * scale + 0.5)


class ShortEdgeResize(imgaug.ImageAugmentor):
    """Resize to a short edge drawn from ``short_edges`` (an int or an inclusive range), capped so
    the long edge stays within ``max_size``."""

    def __init__(self, short_edges, max_size: int, interp: int = cv2.INTER_LINEAR):
        super().__init__()
        if isinstance(short_edges, int):
            short_edges = (short_edges, short_edges)
        self.short_edges, self.max_size, self.interp = tuple(short_edges), max_size, interp

    def get_transform(self, img):
        h, w = img.shape[:2]
        short_edge = self.rng.randint(self.short_edges[0], self.short_edges[1] + 1)
        return imgaug.ResizeTransform(h, w, *_resized_shape(h, w, short_edge, self.max_size), self.interp)


class DetectionTrainMapper:
    """A detection record (``file_name``, float32 ``boxes``) -> (float32 image, its boxes), resized
    and randomly flipped. A class with its settings, so worker processes get everything they need."""

    def __init__(self, short_edges, max_size: int):
        self.augmentors = imgaug.AugmentorList(
            [ShortEdgeResize(short_edges, max_size), imgaug.Flip(horiz=True)]
        )

    def __call__(self, record: dict):
        image = cv2.imread(record["file_name"], cv2.IMREAD_COLOR)
        if image is None:
            raise FileNotFoundError(f"cannot read image {record['file_name']}")
        tfm = self.augmentors.get_transform(image)
        image = tfm.apply_image(image.astype(np.float32))
        boxes = enclosing_boxes(tfm.apply_coords(box_corners(record["boxes"])))
        return image, boxes


# ---- detection in the older augmentor API -----------------------------------------------------


class LegacyShortEdgeResize(transform.TransformAugmentorBase):
    """A fixed short edge, written against the older base class: ``_get_augment_params`` returns the
    transform and ``__init__`` only stores its arguments."""

    def __init__(self, short_edge: int, max_size: int, interp: int = cv2.INTER_LINEAR):
        self._init(locals())

    def _get_augment_params(self, img):
        h, w = img.shape[:2]
        new_shape = _resized_shape(h, w, self.short_edge, self.max_size)
        return transform.ResizeTransform(h, w, *new_shape, self.interp)


def legacy_detection_train_mapper(short_edge: int, max_size: int):
    """DetectionTrainMapper as older scripts wrote it: a closure using ``augment_return_params`` and
    ``augment_coords``."""
    augmentors = imgaug.AugmentorList([LegacyShortEdgeResize(short_edge, max_size), imgaug.Flip(horiz=True)])

    def preprocess(record):
        image = cv2.imread(record["file_name"], cv2.IMREAD_COLOR).astype(np.float32)
        image, params = augmentors.augment_return_params(image)
        points = augmentors.augment_coords(box_corners(record["boxes"]), params)
        return image, enclosing_boxes(points)

    return preprocess
