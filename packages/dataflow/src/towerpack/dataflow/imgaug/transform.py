"""Deterministic image transforms: what an augmentor returns once its random parameters are drawn.

A transform applies the same operation to an image (``apply_image``), to coordinates
(``apply_coords``, an Nx2 float array of (x=column, y=row)) and to anything else a subclass names
``apply_<kind>``. ``apply_*`` may change its input: coordinate methods work in place, crops return
numpy views.

Coordinate conventions follow the reference: flips (``x -> w - x``) and resizes (``x * new_w / w``)
treat integer coordinates as pixel *edges*; affine warps apply cv2's matrix, which treats them as
pixel *centres*. The two can disagree by half a pixel.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import cv2
import numpy as np

#: Exported from ``imgaug`` as in the reference; the other transforms are importable from here.
__all__ = [
    "CropTransform",
    "FlipTransform",
    "ResizeTransform",
    "Transform",
    "TransformFactory",
    "TransformList",
]

logger = logging.getLogger(__name__)
_repr_fallback_warned: set[type] = set()


def init_repr(obj: Any) -> str:
    """``imgaug.Name(arg=value, ...)`` from the constructor's arguments, omitting those left at default.

    Needs an attribute per argument (which ``_init(locals())`` gives) and no ``*args``/``**kwargs``;
    otherwise it logs once per class and falls back to ``object.__repr__``.
    """
    cls = type(obj)
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        params = {}
    parts = []
    for name, p in list(params.items())[1:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or not hasattr(obj, name):
            if cls not in _repr_fallback_warned:
                _repr_fallback_warned.add(cls)
                logger.warning("%s cannot show its arguments (no attribute %r)", cls.__name__, name)
            return object.__repr__(obj)
        value = getattr(obj, name)
        if p.default is not p.empty and _same(value, p.default):
            continue
        parts.append(f"{name}={value!r}")
    return f"imgaug.{cls.__name__}({', '.join(parts)})"


def store_args(obj: Any, params: dict[str, Any] | None) -> None:
    """Store constructor arguments as attributes of ``obj`` (what ``_init(locals())`` does)."""
    for name, value in (params or {}).items():
        if name != "self" and not name.startswith("_"):
            setattr(obj, name, value)


def _same(value: Any, default: Any) -> bool:
    if value is default:
        return True
    simple = (int, float, str, bool, tuple, type(None))
    if type(value) is type(default) and isinstance(value, simple):
        try:
            return bool(value == default)
        except (ValueError, TypeError):  # tuples holding arrays
            return False
    return False


def as_coords(coords: Any) -> np.ndarray:
    """``coords`` as an Nx2 float array: the array itself when it already is one (so edits are in place)."""
    if not isinstance(coords, np.ndarray) or coords.dtype.kind != "f":
        coords = np.asarray(coords, dtype=np.float32)
    if coords.ndim != 2 or coords.shape[1] != 2:
        raise ValueError(f"coordinates must be an Nx2 array of (x, y), got shape {coords.shape}")
    return coords


def keep_channel_axis(out: np.ndarray, img: np.ndarray) -> np.ndarray:
    """Give back the trailing axis of an HxWx1 input that cv2 dropped."""
    if img.ndim == 3 and out.ndim == 2:
        return out[:, :, np.newaxis]
    return out


_CV2_FLIP_DTYPES = tuple(
    np.dtype(d) for d in (np.uint8, np.int8, np.uint16, np.int16, np.int32, np.float32, np.float64)
)


def _not_implemented(cls_name: str, method: str) -> Callable[..., Any]:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{cls_name} does not implement {method}()")

    return fail


def _identity(x: Any) -> Any:
    return x


class BaseTransform:
    """The root of all transforms (kept for ``isinstance`` checks, as the reference has it)."""

    def _init(self, params: dict[str, Any] | None = None) -> None:
        """Store constructor arguments (pass ``locals()``) as attributes, except ``self`` and ``_names``."""
        store_args(self, params)

    def __repr__(self) -> str:
        return init_repr(self)

    __str__ = __repr__


class Transform(BaseTransform):
    """A transform; a missing ``apply_<kind>`` resolves to a function raising NotImplementedError."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("apply_"):
            return _not_implemented(type(self).__name__, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


class ResizeTransform(Transform):
    """Resize an ``h x w`` image to ``new_h x new_w`` with cv2."""

    def __init__(self, h: int, w: int, new_h: int, new_w: int, interp: int) -> None:
        self.h, self.w, self.new_h, self.new_w, self.interp = h, w, new_h, new_w, interp

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        if img.shape[:2] != (self.h, self.w):
            raise ValueError(f"ResizeTransform was made for a {self.h}x{self.w} image, got shape {img.shape}")
        out = cv2.resize(img, (self.new_w, self.new_h), interpolation=self.interp)
        return keep_channel_axis(out, img)

    def apply_coords(self, coords: np.ndarray) -> np.ndarray:
        coords = as_coords(coords)
        coords[:, 0] *= self.new_w * 1.0 / self.w
        coords[:, 1] *= self.new_h * 1.0 / self.h
        return coords


class CropTransform(Transform):
    """Cut the ``h x w`` window at row ``y0``, column ``x0`` (a view of the input)."""

    def __init__(self, y0: int, x0: int, h: int, w: int) -> None:
        self.y0, self.x0, self.h, self.w = y0, x0, h, w

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        y0, x0, h, w = self.y0, self.x0, self.h, self.w
        if y0 < 0 or x0 < 0 or y0 + h > img.shape[0] or x0 + w > img.shape[1]:
            raise ValueError(
                f"crop of {h}x{w} at (y0={y0}, x0={x0}) does not fit an image of shape {img.shape}"
            )
        return img[y0 : y0 + h, x0 : x0 + w]

    def apply_coords(self, coords: np.ndarray) -> np.ndarray:
        coords = as_coords(coords)
        coords[:, 0] -= self.x0
        coords[:, 1] -= self.y0
        return coords


class WarpAffineTransform(Transform):
    """``cv2.warpAffine`` with a 2x3 matrix into an image of ``dsize = (width, height)``."""

    def __init__(
        self,
        mat: np.ndarray,
        dsize: tuple[int, int],
        interp: int = cv2.INTER_LINEAR,
        borderMode: int = cv2.BORDER_CONSTANT,
        borderValue: Any = 0,
    ) -> None:
        self._init(locals())

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        out = cv2.warpAffine(
            img,
            self.mat,
            self.dsize,
            flags=self.interp,
            borderMode=self.borderMode,
            borderValue=self.borderValue,
        )
        return keep_channel_axis(out, img)

    def apply_coords(self, coords: np.ndarray) -> np.ndarray:
        coords = as_coords(coords)
        mat = np.asarray(self.mat, dtype=np.float64)
        return (coords @ mat[:, :2].T + mat[:, 2]).astype(coords.dtype, copy=False)


class FlipTransform(Transform):
    """Mirror an ``h x w`` image left-right (``horiz``) or upside down, into a new contiguous array.

    The reference returned a view; every later copy of a mirrored view (the wire, batching) is a
    strided one, 400 us for 224x224x3 uint8 against 6 us for ``cv2.flip``.
    """

    def __init__(self, h: int, w: int, horiz: bool = True) -> None:
        self.h, self.w, self.horiz = h, w, horiz

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        if isinstance(img, np.ndarray) and img.dtype in _CV2_FLIP_DTYPES and img.ndim in (2, 3):
            return keep_channel_axis(cv2.flip(img, 1 if self.horiz else 0), img)
        return np.ascontiguousarray(img[:, ::-1] if self.horiz else img[::-1])

    def apply_coords(self, coords: np.ndarray) -> np.ndarray:
        coords = as_coords(coords)
        if self.horiz:
            coords[:, 0] = self.w - coords[:, 0]
        else:
            coords[:, 1] = self.h - coords[:, 1]
        return coords


class TransposeTransform(Transform):
    """Swap rows and columns: HxW becomes WxH."""

    def __init__(self) -> None:
        pass

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        if img.ndim == 2 or img.shape[2] <= 4:
            return keep_channel_axis(cv2.transpose(img), img)
        return np.ascontiguousarray(img.swapaxes(0, 1))  # more channels than cv2 handles

    def apply_coords(self, coords: np.ndarray) -> np.ndarray:
        coords = as_coords(coords)
        coords[:, [0, 1]] = coords[:, [1, 0]]
        return coords


class NoOpTransform(Transform):
    """Leave everything unchanged: every ``apply_<kind>`` is the identity."""

    def __init__(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("apply_"):
            return _identity
        raise AttributeError(f"'NoOpTransform' object has no attribute {name!r}")


class PhotometricTransform(Transform):
    """Change pixel values with ``func``; coordinates stay where they are."""

    def __init__(self, func: Callable[[np.ndarray], np.ndarray], name: str | None = None) -> None:
        self.func = func  # set directly: several of these are made per image
        self.name = name

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        return self.func(img)

    def apply_coords(self, coords: np.ndarray) -> np.ndarray:
        return coords

    def __repr__(self) -> str:
        return f"imgaug.PhotometricTransform({self.name or ''})"


class TransformFactory(Transform):
    """A transform made of given functions: ``TransformFactory(name="x", apply_image=f, apply_coords=g)``."""

    def __init__(self, name: str | None = None, **kwargs: Callable[..., Any]) -> None:
        for key, fn in kwargs.items():
            if not key.startswith("apply_"):
                raise KeyError(f"TransformFactory takes only apply_<kind> functions, got {key!r}")
            setattr(self, key, fn)
        self.name = name

    def __repr__(self) -> str:
        return f"imgaug.TransformFactory({self.name or ''})"


def _one_by_one(tfms: Sequence[BaseTransform], img: Any) -> Any:
    for t in tfms:
        img = t.apply_image(img)
    return img


#: How a TransformList applies its transforms to an image. colour_matrix, which builds on this
#: module, installs its own (runs of colour transforms in one pass) when it is imported, as the
#: colour augmentors' module does.
_apply_image_list: Callable[[Sequence[BaseTransform], Any], Any] = _one_by_one


def set_image_list_applier(apply: Callable[[Sequence[BaseTransform], Any], Any]) -> None:
    """Make every TransformList apply its transforms to an image with ``apply(tfms, img)``."""
    global _apply_image_list
    _apply_image_list = apply


class TransformList(BaseTransform):
    """Transforms applied one after the other; nested lists are flattened."""

    def __init__(self, tfms: Iterable[BaseTransform]) -> None:
        flat: list[BaseTransform] = []
        for t in tfms:
            if isinstance(t, TransformList):
                flat.extend(t.tfms)
            elif isinstance(t, BaseTransform):
                flat.append(t)
            else:
                raise TypeError(f"TransformList takes transforms, got {type(t).__name__}: {t!r}")
        self.tfms = flat

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        return _apply_image_list(self.tfms, img)

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("apply_"):
            raise AttributeError(f"'TransformList' object has no attribute {name!r}")

        def apply_all(x: Any) -> Any:
            for t in self.tfms:
                x = getattr(t, name)(x)
            return x

        return apply_all

    def __repr__(self) -> str:
        inner = ",\n".join("  " + repr(t) for t in self.tfms)
        return f"imgaug.TransformList([\n{inner}])"

    __str__ = __repr__

    def __add__(self, other: BaseTransform) -> TransformList:
        return TransformList([*self.tfms, other])

    def __iadd__(self, other: BaseTransform) -> TransformList:
        self.tfms.extend(TransformList([other]).tfms)
        return self

    def __radd__(self, other: BaseTransform) -> TransformList:
        return TransformList([other, *self.tfms])


class LazyTransform(BaseTransform):
    """A transform whose parameters are drawn from the image it is first applied to.

    ``apply_image`` calls ``get_transform(img)`` once and keeps the result; other ``apply_<kind>``
    raise AssertionError before that (they have no image to draw from). ``colour_affine`` marks a
    colour draw, which depends on the image's shape only: a colour run may resolve it early.
    """

    def __init__(
        self, get_transform: Callable[[np.ndarray], BaseTransform], colour_affine: bool = False
    ) -> None:
        self.get_transform = get_transform
        self.colour_affine = colour_affine
        self._transform: BaseTransform | None = None

    @property
    def resolved(self) -> BaseTransform | None:
        """The transform drawn so far, or None."""
        return self._transform

    def resolve(self, img: np.ndarray) -> BaseTransform:
        """Draw the transform from ``img`` unless drawn already; return it."""
        if self._transform is None:
            self._transform = self.get_transform(img)
        return self._transform

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        return self.resolve(img).apply_image(img)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("apply_"):
            if self.__dict__.get("_transform") is None:
                raise AssertionError(
                    f"{name}() called before apply_image(): this transform draws its parameters "
                    "from the first image it is applied to"
                )
            return getattr(self._transform, name)
        raise AttributeError(f"'LazyTransform' object has no attribute {name!r}")

    def __repr__(self) -> str:
        if self._transform is None:
            return f"LazyTransform(get_transform={self.get_transform!r})"
        return repr(self._transform)

    __str__ = __repr__
