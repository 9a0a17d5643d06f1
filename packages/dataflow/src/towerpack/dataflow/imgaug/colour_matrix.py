"""Colour jitter in one pass: consecutive colour-affine transforms run as one 3x4 colour matrix.

``Brightness``, ``BrightnessScale``, ``Contrast``, ``Saturation`` and ``Lighting`` each map every
pixel's colour ``x`` to ``M x + b``; Contrast's ``b`` depends on the mean colour of its input, which
for a chain is the chain's input mean pushed through the transforms before it. A run of them is
therefore one matrix per image. Where a :class:`~.transform.TransformList` holds such a run on
float32 pixels (after ``ToFloat32``, up to and including ``ToUint8``, as the reference's fbresnet
list has it), it applies the run in one pass (``cv2.transform`` into reused float32 buffers)
instead of a new float32 image per augmentor. Parameters are drawn exactly as step by step.

What differs: the one pass clips once, at the end, while step by step every augmentor with
``clip=True`` clips its own output. Where no intermediate value leaves [0, 255] the two agree;
uint8 results can still differ by one level where the exact value lies within 1/1000 of an
integer (float32 rounding in either path decides those; the tests check the rest is equal).
Where an intermediate value is clipped (a bright pixel scaled by 1.4, then darkened), they
differ. :func:`set_colour_path` with
``ColourPath.EXACT`` (or ``TOWERPACK_COLOUR_PATH=exact``) applies every augmentor in turn, as the
reference does. Runs on uint8 pixels (no ``ToFloat32``: every augmentor truncates to uint8) always
go step by step.
"""

from __future__ import annotations

import enum
import math
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from .base import PhotometricAugmentor
from .transform import (
    BaseTransform,
    LazyTransform,
    NoOpTransform,
    PhotometricTransform,
    TransformList,
    set_image_list_applier,
)

__all__ = [
    "COLOUR_PATH_VAR",
    "AffineColourAugmentor",
    "AffineColourTransform",
    "CastTransform",
    "ColourPath",
    "affine_blend",
    "affine_scale",
    "apply_in_order",
    "colour_path",
    "grey_weights",
    "set_colour_path",
]

#: Environment variable holding the colour path; :func:`set_colour_path` sets it so spawned workers see it.
COLOUR_PATH_VAR = "TOWERPACK_COLOUR_PATH"

#: One level is 1.0; a value this close below an integer truncates to that integer (see the docstring).
_TRUNCATION_SLACK = 2.0**-12

#: An affine colour map as three rows ``(m0, m1, m2, b)``: channel i becomes ``sum(m_j x_j) + b``.
#: Plain floats: composing a handful of them costs less in Python than in numpy's small arrays.
Affine = tuple[tuple[float, float, float, float], ...]


class ColourPath(enum.Enum):
    """How runs of colour-affine transforms are applied."""

    FUSED = "fused"  # one 3x4 matrix per image, one clip at the end (the default)
    EXACT = "exact"  # every augmentor in turn, clipping after each, as the reference

    @classmethod
    def parse(cls, value: ColourPath | str) -> ColourPath:
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            names = ", ".join(repr(c.value) for c in cls)
            raise ValueError(f"the colour path must be one of {names}, got {value!r}") from None


def colour_path() -> ColourPath:
    """The colour path of this process: ``TOWERPACK_COLOUR_PATH``, fused when unset."""
    value = os.environ.get(COLOUR_PATH_VAR)
    if not value:
        return ColourPath.FUSED
    try:
        return ColourPath.parse(value)
    except ValueError as e:
        raise ValueError(f"environment variable {COLOUR_PATH_VAR}: {e}") from None


def set_colour_path(path: ColourPath | str) -> ColourPath:
    """Choose the colour path for this process and the workers it starts later; returns the previous one."""
    path = ColourPath.parse(path)
    previous = colour_path()
    os.environ[COLOUR_PATH_VAR] = path.value
    return previous


#: OpenCV's float colour-to-grey weights (float32 values), in RGB order.
_GREY_RGB = tuple(float(w) for w in np.array([0.299, 0.587, 0.114], dtype=np.float32))


def grey_weights(rgb: bool) -> tuple[float, float, float]:
    """The weights of OpenCV's float colour-to-grey conversion, for RGB or BGR channel order."""
    return _GREY_RGB if rgb else _GREY_RGB[::-1]


def affine_scale(scale: float, offset: Sequence[float] = (0.0, 0.0, 0.0)) -> Affine:
    """``scale * x + offset`` (one offset per channel)."""
    s = float(scale)
    return ((s, 0.0, 0.0, float(offset[0])), (0.0, s, 0.0, float(offset[1])), (0.0, 0.0, s, float(offset[2])))


_IDENTITY = affine_scale(1.0)


def affine_blend(v: float, weights: Sequence[float]) -> Affine:
    """``v * x + (1 - v) * grey``, with ``grey = weights . x`` in every channel."""
    v = float(v)
    g0, g1, g2 = ((1 - v) * w for w in weights)
    return ((g0 + v, g1, g2, 0.0), (g0, g1 + v, g2, 0.0), (g0, g1, g2 + v, 0.0))


def _then(first: Affine, second: Affine) -> Affine:
    """``second`` applied after ``first``."""
    f0, f1, f2 = first
    return tuple(
        (
            r0 * f0[0] + r1 * f1[0] + r2 * f2[0],
            r0 * f0[1] + r1 * f1[1] + r2 * f2[1],
            r0 * f0[2] + r1 * f1[2] + r2 * f2[2],
            r0 * f0[3] + r1 * f1[3] + r2 * f2[3] + rb,
        )
        for r0, r1, r2, rb in second
    )


def _image_of(affine: Affine, x: Sequence[float]) -> tuple[float, float, float]:
    return tuple(row[0] * x[0] + row[1] * x[1] + row[2] * x[2] + row[3] for row in affine)


class AffineColourTransform(PhotometricTransform):
    """A photometric transform that is affine in colour on HxWx3 images: ``M x + b`` for every pixel.

    ``func`` applies it step by step (the exact path); ``affine(mean)`` gives the map for an input
    whose mean colour is ``mean`` (three floats, or None unless ``needs_mean``); ``clip`` says
    whether the step clips its result to [0, 255].
    """

    def __init__(
        self,
        func: Callable[[np.ndarray], np.ndarray],
        name: str,
        affine: Callable[[Sequence[float] | None], Affine],
        clip: bool,
        needs_mean: bool = False,
    ) -> None:
        super().__init__(func, name)
        self.affine = affine
        self.clip = bool(clip)
        self.needs_mean = needs_mean


class CastTransform(PhotometricTransform):
    """``ToFloat32`` / ``ToUint8``: a change of dtype that a colour run can absorb."""

    def __init__(self, func: Callable[[np.ndarray], np.ndarray], dtype: Any) -> None:
        self.dtype = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)
        super().__init__(func, _CAST_NAMES.get(self.dtype) or f"To({self.dtype})")


_CAST_NAMES = {np.dtype(np.float32): "ToFloat32", np.dtype(np.uint8): "ToUint8"}


class AffineColourAugmentor(PhotometricAugmentor):
    """A photometric augmentor whose change is affine in colour on HxWx3 images.

    Subclasses implement ``_colour_affine(params, mean)``, the affine map that ``_augment(img,
    params)`` applies to an input of mean colour ``mean`` (None unless ``needs_mean``), and have
    ``clip``. A subclass that overrides ``_augment`` below that is applied step by step only.
    """

    colour_affine = True
    needs_mean = False

    def get_transform(self, img: np.ndarray) -> BaseTransform:
        if not _fusable(type(self)):
            return super().get_transform(img)
        params = self._get_augment_params(img)
        return AffineColourTransform(
            lambda im: self._augment(im, params),
            type(self).__name__,
            lambda mean: self._colour_affine(params, mean),
            clip=self.clip,
            needs_mean=self.needs_mean,
        )

    def _colour_affine(self, params: Any, mean: Sequence[float] | None) -> Affine:
        raise NotImplementedError(f"{type(self).__name__} must implement _colour_affine(params, mean)")


_fusable_classes: dict[type, bool] = {}


def _fusable(cls: type) -> bool:
    """Whether ``cls._colour_affine`` describes ``cls._augment`` (no subclass changed the step alone)."""
    known = _fusable_classes.get(cls)
    if known is None:
        known = False
        for klass in cls.__mro__:
            if "_colour_affine" in vars(klass):
                known = klass is not AffineColourAugmentor
                break
            if "_augment" in vars(klass):
                break
        _fusable_classes[cls] = known
    return known


# ---- finding runs ---------------------------------------------------------------------------------


def _resolved(t: BaseTransform, img: np.ndarray) -> BaseTransform | None:
    """``t`` itself, or what a lazy ``t`` stands for, drawn from ``img`` when it is a colour draw."""
    if not isinstance(t, LazyTransform):
        return t
    if t.resolved is None:
        if not t.colour_affine:
            return None  # a geometric draw needs the image it will receive
        t.resolve(img)  # colour draws depend on the shape only, which a colour run keeps
    return t.resolved


def _flat(t: BaseTransform) -> list[BaseTransform]:
    return t.tfms if isinstance(t, TransformList) else [t]


@dataclass
class _Run:
    steps: list[AffineColourTransform]
    end: int  # index in the transform list just past the run
    out_dtype: np.dtype
    clip: bool

    def apply(self, img: np.ndarray) -> np.ndarray:
        return _apply_affine(img, compose(self.steps, img), self.out_dtype, self.clip)


def _find_run(tfms: Sequence[BaseTransform], start: int, img: np.ndarray) -> _Run | None:
    """The fusable run of colour transforms at ``tfms[start]`` for ``img``, or None.

    A run computes in float32 from its first colour step on: the input is float32 or the run
    starts with ``ToFloat32``; a ``ToUint8`` ends it. Each transform of the list joins whole or
    not at all.
    """
    if img.ndim != 3 or img.shape[2] != 3 or img.dtype not in _RUN_DTYPES:
        return None
    dtype, steps, parts, clip = img.dtype, [], 0, False
    for index in range(start, len(tfms)):
        t = _resolved(tfms[index], img)
        if t is None:
            break
        flat = _flat(t)
        joined = _join(flat, dtype)
        if joined is None:
            break
        dtype, new_steps, closed = joined
        steps += new_steps
        parts += len(flat)
        clip = new_steps[-1].clip if new_steps else clip
        if closed:
            return _Run(steps, index + 1, np.dtype(np.uint8), True) if steps else None
        end = index + 1
    else:
        end = len(tfms)
    if not steps or parts < 2:
        return None
    return _Run(steps, end, np.dtype(dtype), clip)


def _join(
    parts: list[BaseTransform], dtype: np.dtype
) -> tuple[np.dtype, list[AffineColourTransform], bool] | None:
    """``(dtype after, colour steps, closed by ToUint8)`` if all of ``parts`` can join a run, else None."""
    steps: list[AffineColourTransform] = []
    for i, p in enumerate(parts):
        if isinstance(p, NoOpTransform):
            continue
        if isinstance(p, CastTransform) and p.dtype == np.float32:
            dtype = p.dtype
        elif isinstance(p, AffineColourTransform) and dtype == np.float32:
            steps.append(p)
        elif (
            isinstance(p, CastTransform)
            and p.dtype == np.uint8
            and dtype == np.float32
            and i == len(parts) - 1
        ):
            return dtype, steps, True
        else:
            return None
    return dtype, steps, False


_RUN_DTYPES = (np.dtype(np.uint8), np.dtype(np.float32))
#: What a colour run can be made of (a lazy transform or a list may stand for colour transforms).
_RUN_PARTS = (AffineColourTransform, CastTransform, NoOpTransform, LazyTransform, TransformList)


def apply_in_order(tfms: Sequence[BaseTransform], img: Any) -> Any:
    """Apply ``tfms`` to ``img`` one after the other; on the fused path, colour runs go in one pass.
    Every TransformList applies its transforms this way once this module is imported."""
    if not isinstance(img, np.ndarray) or colour_path() is ColourPath.EXACT:
        for t in tfms:
            img = t.apply_image(img)
        return img
    index = 0
    while index < len(tfms):
        may_start = isinstance(tfms[index], _RUN_PARTS) and isinstance(img, np.ndarray)
        run = _find_run(tfms, index, img) if may_start else None
        if run is None:
            img = tfms[index].apply_image(img)
            index += 1
        else:
            img = run.apply(img)
            index = run.end
    return img


# ---- composing and applying -----------------------------------------------------------------------


def compose(steps: Sequence[AffineColourTransform], img: np.ndarray) -> Affine:
    """The map of ``steps`` applied in order to ``img``, without the intermediate clips."""
    total = _IDENTITY
    mean = None
    for step in steps:
        if step.needs_mean:
            mean = cv2.mean(img)[:3]
            break
    for step in steps:
        total = _then(total, step.affine(None if mean is None else _image_of(total, mean)))
    return total


_scratch = threading.local()


def _scratch_buffer(slot: int, shape: tuple[int, ...]) -> np.ndarray:
    """A float32 array of ``shape`` reused across calls in this thread (fresh pages cost page faults)."""
    buffers = _scratch.__dict__.setdefault("buffers", {})
    size = math.prod(shape)
    flat = buffers.get(slot)
    if flat is None or flat.size < size:
        flat = buffers[slot] = np.empty(size, np.float32)
    return flat[:size].reshape(shape)


def _apply_affine(img: np.ndarray, affine: Affine, out_dtype: np.dtype, clip: bool) -> np.ndarray:
    """``affine`` on every pixel, clipped to [0, 255] when ``clip``, as ``out_dtype``.

    uint8 output truncates (as ``astype`` after the reference's clip): the offset is lowered by half
    a level, less a slack, and the conversion rounds to nearest.
    """
    if img.dtype == np.float32:
        src = img
    else:
        src = _scratch_buffer(0, img.shape)
        np.copyto(src, img)
    m34 = np.array(affine)
    if out_dtype == np.uint8:
        m34[:, 3] += _TRUNCATION_SLACK - 0.5
        work = _scratch_buffer(1, img.shape)
        cv2.transform(src, m34, dst=work)
        cv2.threshold(work, 0, 0, cv2.THRESH_TOZERO, dst=work)  # negatives to 0, so that |x| below is x
        return cv2.convertScaleAbs(work)  # rounds and saturates: 4x faster than any signed conversion
    out = cv2.transform(src, m34)
    if clip:
        np.clip(out, 0, 255, out=out)
    return out


set_image_list_applier(apply_in_order)
