"""Image dataflows: ImageFromFile reads image files; AugmentImage* run augmentors over datapoints.

The augmenting dataflows take a list of :mod:`towerpack.dataflow.imgaug` augmentors (or an
``AugmentorList``), draw one transform per datapoint and apply it to image components
(``apply_image``) and to Nx2 ``(x, y)`` coordinate components (``apply_coords``). With
``copy=True`` the components are copied first, so in-place augmentors cannot corrupt arrays the
input keeps (a cached dataset); the datapoint itself is never modified, a shallow copy is yielded.
With ``catch_exceptions=True`` an error while augmenting drops the datapoint and is counted and
logged (:class:`~towerpack.dataflow.pipeline.augment_errors.AugmentErrors`), so ``len()`` is then an upper
bound.

Fixed from the reference: integer images other than uint8 are refused (its dtype check let
them through); coordinates are checked without the ``np.float`` alias NumPy removed (which made
every coordinate dataflow fail); ``ImageFromFile`` shuffles its own copy of the file list, not the
caller's. Bad input (not an array, a wrong dtype or shape) is an error even with
``catch_exceptions=True``: it is a bug in the pipeline, not an occasional bad datapoint.
"""

from __future__ import annotations

import copy as copy_module
import os
from collections.abc import Iterator, Sequence
from typing import Any

import cv2
import numpy as np

from ..imgaug.base import AugmentorList, shape2d
from ..imgaug.base import check_dtype as imgaug_check_dtype
from ..pipeline.augment_errors import AugmentErrors
from ..pipeline.base import DataFlow, RNGDataFlow
from ..pipeline.mapping import MapData, MapDataComponent
from .decode import Color, read_image

__all__ = [
    "AugmentImageComponent",
    "AugmentImageComponents",
    "AugmentImageCoordinates",
    "ImageFromFile",
    "check_dtype",
    "validate_coords",
]


def check_dtype(img: Any, where: str = "image") -> None:
    """Raise TypeError unless ``img`` is an ndarray of uint8 or a floating dtype."""
    try:
        imgaug_check_dtype(img)
    except TypeError as e:
        raise TypeError(f"{where}: {e}") from None


def validate_coords(coords: Any, where: str = "coords") -> None:
    """Raise TypeError unless ``coords`` is an Nx2 floating-point array of ``(x, y)`` rows."""
    if not isinstance(coords, np.ndarray):
        raise TypeError(f"{where}: coordinates must be an Nx2 numpy array, got {type(coords).__name__}")
    if coords.ndim != 2 or coords.shape[1] != 2:
        raise TypeError(f"{where}: coordinates must be an Nx2 array of (x, y) rows, got shape {coords.shape}")
    if not np.issubdtype(coords.dtype, np.floating):
        raise TypeError(f"{where}: coordinates must be floating point, got dtype {coords.dtype}")


def augmentor_list(augmentors: Any, owner: str) -> AugmentorList:
    """``augmentors`` (a list or tuple of augmentors, or an AugmentorList) as an AugmentorList."""
    if isinstance(augmentors, AugmentorList):
        return augmentors
    if not isinstance(augmentors, (list, tuple)):
        raise TypeError(f"{owner}: augmentors must be a list of augmentors, got {type(augmentors).__name__}")
    return AugmentorList(list(augmentors))


def _shallow_copy(dp: Any, owner: str) -> dict | list:
    """A writable shallow copy of a list, tuple or dict datapoint."""
    if isinstance(dp, dict):
        return dict(dp)
    if isinstance(dp, (list, tuple)):
        return list(dp)
    raise TypeError(f"{owner}: a datapoint must be a list, tuple or dict, got {type(dp).__name__}")


def _like(dp: Any, out: dict | list) -> Any:
    return tuple(out) if isinstance(dp, tuple) else out


def _maybe_copy(x: Any, copy: bool) -> Any:
    return copy_module.deepcopy(x) if copy else x


class ImageFromFile(RNGDataFlow):
    """Yield ``[image]`` for every image file: RGB ``HxWx3`` uint8, or ``HxWx1`` with ``channel=1``.

    Args:
        files: image paths (any format cv2 reads); an unreadable file is an error naming it.
        channel: 3 (RGB; grayscale files are expanded) or 1 (grayscale).
        resize: an int or ``(h, w)``: resize every image to it (bilinear).
        shuffle: read the files in a new random order each epoch.
    """

    def __init__(
        self,
        files: Sequence[str | os.PathLike],
        channel: int = 3,
        resize: int | Sequence[int] | None = None,
        shuffle: bool = False,
    ) -> None:
        self.files = list(files)
        if not self.files:
            raise ValueError("ImageFromFile: no image files given")
        self.channel = int(channel)
        if self.channel not in (1, 3):
            raise ValueError(f"ImageFromFile: channel must be 1 or 3, got {channel!r}")
        self.resize = None if resize is None else shape2d(resize, "ImageFromFile: resize")
        if self.resize is not None and min(self.resize) < 1:
            raise ValueError(f"ImageFromFile: resize must be positive, got {resize!r}")
        self.shuffle = shuffle

    def __len__(self) -> int:
        return len(self.files)

    def __iter__(self) -> Iterator[list[np.ndarray]]:
        order = self.rng.permutation(len(self.files)) if self.shuffle else range(len(self.files))
        color = Color.RGB if self.channel == 3 else Color.GRAY
        for i in order:
            im = read_image(self.files[i], color)
            if self.resize is not None:
                h, w = self.resize
                im = cv2.resize(im, (w, h), interpolation=cv2.INTER_LINEAR)
            if self.channel == 1:
                im = im[:, :, np.newaxis]
            yield [im]


class _Augmenting:
    """What the augmenting dataflows share: their augmentors, copy flag and error counter."""

    ds: DataFlow

    def _setup(self, augmentors: Any, copy: bool, catch_exceptions: bool) -> None:
        self.augs = augmentor_list(augmentors, type(self).__name__)
        self.copy = copy
        self.errors = AugmentErrors(catch_exceptions, type(self).__name__)

    def reset_state(self) -> None:
        self.ds.reset_state()
        self.augs.reset_state()


class AugmentImageComponent(_Augmenting, MapDataComponent):
    """Augment the image at ``index`` (a list index or dict key) of every datapoint.

    Args:
        ds: the input dataflow.
        augmentors: a list of augmentors, or an ``AugmentorList``, applied in order.
        index: where the image is in the datapoint.
        copy: copy the image before augmenting (see the module docstring).
        catch_exceptions: drop a datapoint whose augmentation fails, counting and logging it.
    """

    def __init__(
        self,
        ds: DataFlow,
        augmentors: Any,
        index: int | str = 0,
        copy: bool = True,
        catch_exceptions: bool = False,
    ) -> None:
        self._setup(augmentors, copy, catch_exceptions)
        super().__init__(ds, self._augment, index)

    def _augment(self, img: Any) -> Any:
        check_dtype(img, f"{type(self).__name__}: component {self.index!r}")
        with self.errors.catch():
            return self.augs.augment(_maybe_copy(img, self.copy))
        return None


class AugmentImageCoordinates(_Augmenting, MapData):
    """Augment the image at ``img_index`` and move the Nx2 ``(x, y)`` points at ``coords_index`` with it.

    Arguments as :class:`AugmentImageComponent`.
    """

    def __init__(
        self,
        ds: DataFlow,
        augmentors: Any,
        img_index: int | str = 0,
        coords_index: int | str = 1,
        copy: bool = True,
        catch_exceptions: bool = False,
    ) -> None:
        self._setup(augmentors, copy, catch_exceptions)
        self.img_index = img_index
        self.coords_index = coords_index
        super().__init__(ds, self._augment)

    def _augment(self, dp: Any) -> Any:
        name = type(self).__name__
        out = _shallow_copy(dp, name)
        img, coords = out[self.img_index], out[self.coords_index]
        check_dtype(img, f"{name}: component {self.img_index!r}")
        validate_coords(coords, f"{name}: component {self.coords_index!r}")
        with self.errors.catch():
            img, coords = _maybe_copy(img, self.copy), _maybe_copy(coords, self.copy)
            tfm = self.augs.get_transform(img)
            out[self.img_index] = tfm.apply_image(img)
            out[self.coords_index] = tfm.apply_coords(coords)
            return _like(dp, out)
        return None


class AugmentImageComponents(_Augmenting, MapData):
    """Augment several images of a datapoint with one transform, and move coordinates with them.

    The transform is drawn from the first of ``index`` (the major image) and applied to every
    image in ``index`` with ``apply_image`` (so masks get the same interpolation and photometric
    changes, as in the reference) and to every Nx2 array in ``coords_index`` with ``apply_coords``.
    Other arguments as :class:`AugmentImageComponent`.
    """

    def __init__(
        self,
        ds: DataFlow,
        augmentors: Any,
        index: Sequence[int | str] = (0, 1),
        coords_index: Sequence[int | str] = (),
        copy: bool = True,
        catch_exceptions: bool = False,
    ) -> None:
        self._setup(augmentors, copy, catch_exceptions)
        self.index = tuple(index)
        if not self.index:
            raise ValueError(f"{type(self).__name__}: index must name at least one image component")
        self.coords_index = tuple(coords_index)
        super().__init__(ds, self._augment)

    def _augment(self, dp: Any) -> Any:
        name = type(self).__name__
        out = _shallow_copy(dp, name)
        for i in self.index:
            check_dtype(out[i], f"{name}: component {i!r}")
        for i in self.coords_index:
            validate_coords(out[i], f"{name}: component {i!r}")
        with self.errors.catch():
            major = _maybe_copy(out[self.index[0]], self.copy)
            tfm = self.augs.get_transform(major)
            out[self.index[0]] = tfm.apply_image(major)
            for i in self.index[1:]:
                out[i] = tfm.apply_image(_maybe_copy(out[i], self.copy))
            for i in self.coords_index:
                out[i] = tfm.apply_coords(_maybe_copy(out[i], self.copy))
            return _like(dp, out)
        return None
