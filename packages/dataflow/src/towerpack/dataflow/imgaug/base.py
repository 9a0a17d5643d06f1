"""The augmentor interface: draw random parameters from an image, return a deterministic transform.

Randomness differs from the reference on purpose: each augmentor's ``rng`` is seeded from
:func:`towerpack.dataflow.pipeline.seeding.stream_seed` under a stream key taken when it is made, and is
seeded again by ``reset_state()`` and on first use in a new process. Augmentors inside a forked
worker therefore draw their own streams with no at-fork hook, and ``set_seed`` makes a run
reproducible without every worker drawing the same numbers.

``check_dtype`` fixes a reference bug: integer images other than uint8 are rejected (the
reference meant to, but its test never matched).
"""

from __future__ import annotations

import logging
import os
from collections import namedtuple
from typing import Any

import numpy as np

from towerpack.utils.argtools import shape2d as _shape2d

from ..pipeline.seeding import new_stream_key, stream_seed
from . import transform
from .transform import (
    BaseTransform,
    LazyTransform,
    PhotometricTransform,
    TransformFactory,
    TransformList,
    init_repr,
    store_args,
)

__all__ = ["Augmentor", "AugmentorList", "ImageAugmentor", "PhotometricAugmentor"]

logger = logging.getLogger(__name__)

#: A stand-in image that only has a shape: lets one augmentor draw a transform for another's output.
ImagePlaceholder = namedtuple("ImagePlaceholder", ["shape"])

_warn_counts: dict[str, int] = {}


def log_deprecated(what: str, instead: str, times: int = 3) -> None:
    """Log that ``what`` is deprecated, at most ``times`` times per process."""
    count = _warn_counts.get(what, 0)
    if count < times:
        _warn_counts[what] = count + 1
        logger.warning("%s is deprecated since 2020-06-06; use %s instead", what, instead)


def shape2d(value: Any, name: str = "shape") -> tuple[int, int]:
    """``(h, w)`` from an int (a square) or a pair of ints: :func:`towerpack.utils.argtools.shape2d`
    as a tuple."""
    h, w = _shape2d(value, name)
    return h, w


def check_dtype(img: Any) -> None:
    """Raise unless ``img`` is an image array augmentors handle (uint8 or floating point)."""
    if not isinstance(img, np.ndarray):
        raise TypeError(f"an augmentor needs a numpy array image, got {type(img).__name__}")
    if img.dtype.kind in "iub" and img.dtype != np.uint8:
        raise TypeError(
            f"an augmentor needs a uint8 or floating point image, got dtype {img.dtype}; "
            "convert it first (e.g. img.astype('float32'))"
        )


class ImageAugmentor:
    """Base class of augmentors.

    Subclasses implement ``get_transform(img)``, drawing from ``self.rng`` (or ``_rand_range``).
    The older API also works: ``_get_augment_params(img)`` returns parameters, ``_augment(img,
    params)`` applies them and ``_augment_coords(coords, params)`` moves coordinates.

    Two class attributes tell what a draw needs: ``draws_from_shape`` (only ``img.shape``: the
    transform can be drawn before the image is decoded) and ``colour_affine`` (only the shape, and
    the transform is affine in colour or a dtype cast: a colour run may draw it early).
    """

    draws_from_shape: bool = False
    colour_affine: bool = False

    def __init__(self) -> None:
        self._stream_key = new_stream_key()

    # ---- randomness -------------------------------------------------------------------------

    @property
    def rng(self) -> np.random.RandomState:
        """This augmentor's generator, seeded on first use in each process."""
        state = self.__dict__.get("_rng")
        if state is None or self.__dict__.get("_rng_pid") != os.getpid():
            self._seed_rng()
        return self.__dict__["_rng"]

    @rng.setter
    def rng(self, value: np.random.RandomState) -> None:
        self.__dict__["_rng"] = value
        self.__dict__["_rng_pid"] = os.getpid()

    def _seed_rng(self) -> None:
        key = self.__dict__.get("_stream_key")
        if key is None:  # a subclass that never called super().__init__()
            key = self.__dict__["_stream_key"] = new_stream_key()
        self.rng = np.random.RandomState(stream_seed(key) % 2**32)

    def reset_state(self) -> None:
        """Seed ``rng`` again (and, in containers, every child's)."""
        self._seed_rng()

    def _rand_range(self, low: float = 1.0, high: float | None = None, size: Any = None) -> np.ndarray:
        """Uniform float32 in [low, high), or [0, low) with one bound; a 0-d array when ``size`` is None."""
        if high is None:
            low, high = 0.0, low
        return np.asarray(self.rng.uniform(low, high, size), dtype=np.float32)

    # ---- the API ----------------------------------------------------------------------------

    def _init(self, params: dict[str, Any] | None = None) -> None:
        """Store constructor arguments (pass ``locals()``) as attributes, except ``self`` and ``_names``."""
        store_args(self, params)

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        """Draw this augmentor's random parameters for ``img``; return the transform they make."""
        # The older subclass APIs: _get_augment_params returns a transform (TransformAugmentorBase
        # subclasses), or parameters that _augment applies.
        getter = getattr(self, "get_augment_params", None) or self._get_augment_params
        params = getter(img)
        if isinstance(params, BaseTransform):
            return params
        if not hasattr(self, "_augment"):
            raise NotImplementedError(
                f"{type(self).__name__} must implement get_transform(img) "
                "(or the older _augment(img, params))"
            )
        log_deprecated(f"{type(self).__name__}: the _get_augment_params/_augment API", "get_transform", 1)
        fns = {"apply_image": lambda x: self._augment(x, params)}
        if hasattr(self, "_augment_coords"):
            fns["apply_coords"] = lambda c: self._augment_coords(c, params)
        elif type(self).augment_coords is not ImageAugmentor.augment_coords:
            fns["apply_coords"] = lambda c: self.augment_coords(c, params)
        else:
            fns["apply_coords"] = lambda c: c
        return TransformFactory(name=f"LegacyConversion({type(self).__name__})", **fns)

    def _get_augment_params(self, img: np.ndarray) -> Any:
        return None

    def augment(self, img: np.ndarray) -> np.ndarray:
        """Augment one image with freshly drawn parameters."""
        check_dtype(img)
        return self.get_transform(img).apply_image(img)

    def augment_return_params(self, d: np.ndarray) -> tuple[np.ndarray, BaseTransform]:
        """Deprecated: ``t = get_transform(d)``, return ``(t.apply_image(d), t)``."""
        log_deprecated("augment_return_params", "get_transform + apply_image")
        check_dtype(d)
        t = self.get_transform(d)
        return t.apply_image(d), t

    def augment_with_params(self, d: np.ndarray, param: BaseTransform) -> np.ndarray:
        """Deprecated: ``param.apply_image(d)``."""
        log_deprecated("augment_with_params", "transform.apply_image")
        return param.apply_image(d)

    def augment_coords(self, coords: np.ndarray, param: BaseTransform) -> np.ndarray:
        """Deprecated: ``param.apply_coords(coords)``."""
        log_deprecated("augment_coords", "transform.apply_coords")
        return param.apply_coords(coords)

    def __repr__(self) -> str:
        return init_repr(self)

    __str__ = __repr__


#: The reference's other names for the base class.
Augmentor = ImageAugmentor
TransformAugmentorBase = ImageAugmentor


class PhotometricAugmentor(ImageAugmentor):
    """An augmentor that changes pixel values only; coordinates pass through unchanged.

    Subclasses implement ``_get_augment_params(self, img)`` (default: None) and
    ``_augment(self, img, params)``.
    """

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        params = self._get_augment_params(img)
        return PhotometricTransform(lambda im: self._augment(im, params), name=type(self).__name__)

    def _augment(self, img: np.ndarray, params: Any) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} must implement _augment(img, params)")


class AugmentorList(ImageAugmentor):
    """Augmentors applied in order.

    The first draws its parameters from the input image; each later one draws them from the image
    it receives, the first time the returned transform's ``apply_image`` runs. From then on the
    transform is fixed and can be applied to other images of the same shape (masks, a pristine
    copy) and to coordinates.
    """

    def __init__(self, augmentors: list[ImageAugmentor] | tuple[ImageAugmentor, ...]) -> None:
        if not isinstance(augmentors, (list, tuple)):
            got = type(augmentors).__name__
            raise TypeError(f"AugmentorList takes a list or tuple of augmentors, got {got}")
        for a in augmentors:
            if not isinstance(a, ImageAugmentor):
                raise TypeError(f"AugmentorList takes augmentors, got {type(a).__name__}: {a!r}")
        self.augmentors = list(augmentors)
        super().__init__()

    @property
    def colour_affine(self) -> bool:  # type: ignore[override]
        return bool(self.augmentors) and all(a.colour_affine for a in self.augmentors)

    def get_transform(self, img: np.ndarray) -> TransformList:
        check_dtype(img)
        if img.ndim not in (2, 3):
            raise ValueError(f"an image must be HxW or HxWxC, got shape {img.shape}")
        return self._transform_list(img)

    def get_transform_from_shape(self, shape: tuple[int, ...]) -> TransformList:
        """The transform for an image of ``shape`` not decoded yet; the first augmentor must draw
        from the shape alone (``draws_from_shape``)."""
        if self.augmentors and not self.augmentors[0].draws_from_shape:
            raise TypeError(
                f"{type(self.augmentors[0]).__name__} needs the image itself to draw its parameters"
            )
        return self._transform_list(ImagePlaceholder(shape=tuple(shape)))

    def _transform_list(self, img: Any) -> TransformList:
        if not self.augmentors:
            return TransformList([])
        first = self.augmentors[0].get_transform(img)
        rest = [LazyTransform(a.get_transform, a.colour_affine) for a in self.augmentors[1:]]
        return TransformList([first, *rest])

    def reset_state(self) -> None:
        super().reset_state()
        for a in self.augmentors:
            a.reset_state()

    def __repr__(self) -> str:
        inner = ",\n".join("  " + repr(a) for a in self.augmentors)
        return f"imgaug.AugmentorList([\n{inner}])"

    __str__ = __repr__


# The reference also defines the augmentor base's old name in its transform module.
transform.TransformAugmentorBase = ImageAugmentor
