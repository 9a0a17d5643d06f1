"""Photometric augmentors: brightness, contrast, saturation, hue, gamma, blur, lighting and normalisation.

They follow the reference's formulas, parameter draws, dtype and clip rule (see ``pixels.finish``)
so models trained on its statistics see the same data. Arithmetic runs in float32 (float64 for
float64 input) on one array each augmentor allocates and then updates in place; the caller's image
is never modified. Coordinates pass through unchanged.

Brightness, BrightnessScale, Contrast, Saturation and Lighting are affine in colour: each also
gives its affine colour map (``_colour_affine``), so that a run of them on float32 pixels goes in one pass
(:mod:`.colour_matrix`).
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np

from .base import PhotometricAugmentor, log_deprecated
from .colour_matrix import Affine, AffineColourAugmentor, affine_blend, affine_scale, grey_weights
from .pixels import PIXEL_MAX, add_per_channel, channel_means, finish, require_image, work_dtype
from .transform import keep_channel_axis

__all__ = [
    "Brightness",
    "BrightnessScale",
    "Clip",
    "Contrast",
    "Gamma",
    "GaussianBlur",
    "Hue",
    "Lighting",
    "MeanVarianceNormalize",
    "MinMaxNormalize",
    "Saturation",
]

_COLOUR_DTYPES = (np.uint8, np.float32)


def _grey_code(rgb: bool) -> int:
    return cv2.COLOR_RGB2GRAY if rgb else cv2.COLOR_BGR2GRAY


class Hue(PhotometricAugmentor):
    """Shift the hue by ``h`` drawn from ``range``, in OpenCV's half-degree units (useful span: ±90).

    Needs HxWx3 uint8 or float32 input.
    """

    def __init__(self, range: tuple[float, float] = (0, 180), rgb: bool = True) -> None:
        super().__init__()
        rgb = bool(rgb)
        self._init(locals())

    def _get_augment_params(self, _: np.ndarray) -> np.ndarray:
        return self._rand_range(*self.range)

    def _augment(self, img: np.ndarray, hue: Any) -> np.ndarray:
        require_image(img, "Hue", channels=(3,), dtypes=_COLOUR_DTYPES)
        hsv = cv2.cvtColor(img, cv2.COLOR_RGB2HSV if self.rgb else cv2.COLOR_BGR2HSV)
        hue = np.float32(hue)
        if hsv.dtype == np.uint8:  # OpenCV's 8-bit hue is 0..179; the float result truncates back
            hsv[..., 0] = (hsv[..., 0] + hue) % 180
        else:  # float hue is in degrees, 0..360
            hsv[..., 0] = (hsv[..., 0] + 2 * hue) % 360
        return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB if self.rgb else cv2.COLOR_HSV2BGR)


class Brightness(AffineColourAugmentor):
    """Add ``v`` drawn from [-delta, delta) to every pixel (computed in float32)."""

    def __init__(self, delta: float, clip: bool = True) -> None:
        super().__init__()
        if not delta > 0:
            raise ValueError(f"Brightness needs delta > 0, got {delta!r}")
        self._init(locals())

    def _get_augment_params(self, _: np.ndarray) -> np.ndarray:
        return self._rand_range(-self.delta, self.delta)

    def _augment(self, img: np.ndarray, v: Any) -> np.ndarray:
        out = np.add(img, np.float32(v), dtype=np.float32)
        return finish(out, img.dtype, self.clip)

    def _colour_affine(self, v: Any, mean: Any) -> Affine:
        return affine_scale(1.0, [np.float32(v)] * 3)


class BrightnessScale(AffineColourAugmentor):
    """Multiply every pixel by ``v`` drawn from ``range`` (computed in float32)."""

    def __init__(self, range: tuple[float, float], clip: bool = True) -> None:
        super().__init__()
        self._init(locals())

    def _get_augment_params(self, _: np.ndarray) -> np.ndarray:
        return self._rand_range(*self.range)

    def _augment(self, img: np.ndarray, v: Any) -> np.ndarray:
        out = np.multiply(img, np.float32(v), dtype=np.float32)
        return finish(out, img.dtype, self.clip)

    def _colour_affine(self, v: Any, mean: Any) -> Affine:
        return affine_scale(np.float32(v))


class Contrast(AffineColourAugmentor):
    """``x * r + mean * (1 - r)`` with ``r`` drawn from ``factor_range``.

    The mean is that of the grey image (BGR, or RGB with ``rgb=True``) when ``rgb`` is not None, of
    each channel when ``rgb`` is None, and of the whole image for HxW input. Means are exact (float64,
    via cv2); the reference's float32 per-channel means drifted by ~1e-5 relative on large images.
    An HxWx1 image is its own grey image: with ``rgb`` set it uses its mean (the reference failed).
    """

    needs_mean = True

    def __init__(self, factor_range: tuple[float, float], rgb: bool | None = None, clip: bool = True) -> None:
        super().__init__()
        self._init(locals())

    def _get_augment_params(self, _: np.ndarray) -> np.ndarray:
        return self._rand_range(*self.factor_range)

    def _mean(self, img: np.ndarray) -> Any:
        if img.ndim == 2 or img.shape[2] == 1:
            return channel_means(img.reshape(img.shape[0], img.shape[1], 1))[0]
        if self.rgb is None:
            return channel_means(img)
        require_image(img, f"Contrast(rgb={self.rgb})", channels=(3,))
        grey = cv2.cvtColor(img.astype(np.float32, copy=False), _grey_code(self.rgb))
        return cv2.mean(grey)[0]

    def _augment(self, img: np.ndarray, r: Any) -> np.ndarray:
        require_image(img, "Contrast")
        r = np.float32(r)
        dtype = work_dtype(img.dtype)
        offset = (self._mean(img) * (1 - r)).astype(dtype)
        out = np.multiply(img, r, dtype=dtype)
        if offset.ndim:  # one offset per channel
            add_per_channel(out, offset, dtype, out=out)
        else:
            out += offset
        return finish(out, img.dtype, self.clip)

    def _colour_affine(self, r: Any, mean: Any) -> Affine:
        r = float(np.float32(r))
        if self.rgb is not None:
            grey = sum(w * m for w, m in zip(grey_weights(bool(self.rgb)), mean, strict=True))
            mean = (grey, grey, grey)
        return affine_scale(r, [m * (1 - r) for m in mean])


class MeanVarianceNormalize(PhotometricAugmentor):
    """``(x - mean) / max(std, 1 / sqrt(x.size))``, over the whole image or per channel; float32 out."""

    def __init__(self, all_channel: bool = True) -> None:
        super().__init__()
        self._init(locals())

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        require_image(img, "MeanVarianceNormalize")
        out = img.astype(np.float32)
        axis = None if self.all_channel else (0, 1)
        mean = np.mean(out, axis=axis, keepdims=True)
        std = np.std(out, axis=axis, keepdims=True)
        std = np.maximum(std, np.float32(1.0 / np.sqrt(out.size)))
        out -= mean
        out /= std
        return out


class GaussianBlur(PhotometricAugmentor):
    """Blur with ``cv2.GaussianBlur`` (replicated border), keeping shape and dtype.

    The kernel size along each axis is ``2k + 1`` with ``k`` drawn from [size_range[0], size_range[1])
    (an int ``n`` means (0, n); the default gives 1, 3 or 5); sigma is drawn from ``sigma_range``, 0
    meaning "derive it from the kernel size". ``symmetric`` uses the x draws for y too.
    ``max_size=n`` is the deprecated spelling of ``size_range=(0, n)``.
    """

    def __init__(
        self,
        size_range: Any = (0, 3),
        sigma_range: tuple[float, float] = (0, 0),
        symmetric: bool = True,
        max_size: int | None = None,
    ) -> None:
        super().__init__()
        if max_size is not None:
            log_deprecated("GaussianBlur(max_size=n)", "size_range=(0, n)")
            size_range = (0, max_size)
        if not isinstance(size_range, (list, tuple)):
            size_range = (0, size_range)
        if len(size_range) != 2 or not 0 <= size_range[0] < size_range[1]:
            raise ValueError(
                f"GaussianBlur needs size_range=(low, high) with 0 <= low < high, got {size_range!r}"
            )
        if not isinstance(sigma_range, (list, tuple)) or len(sigma_range) != 2 or min(sigma_range) < 0:
            raise ValueError(
                f"GaussianBlur needs sigma_range=(low, high) with values >= 0, got {sigma_range!r}"
            )
        self._init(locals())

    def _get_augment_params(self, _: np.ndarray) -> tuple[tuple[int, int], tuple[float, float]]:
        ksize = self.rng.randint(self.size_range[0], self.size_range[1], size=(2,)) * 2 + 1
        sigma = self._rand_range(*self.sigma_range, size=(2,))
        if self.symmetric:
            ksize[1], sigma[1] = ksize[0], sigma[0]
        return (int(ksize[0]), int(ksize[1])), (float(sigma[0]), float(sigma[1]))

    def _augment(self, img: np.ndarray, params: Any) -> np.ndarray:
        require_image(img, "GaussianBlur", dtypes=(np.uint8, np.uint16, np.int16, np.float32, np.float64))
        (kx, ky), (sx, sy) = params
        out = cv2.GaussianBlur(
            img, (int(kx), int(ky)), sigmaX=float(sx), sigmaY=float(sy), borderType=cv2.BORDER_REPLICATE
        )
        return keep_channel_axis(out, img)


class Gamma(PhotometricAugmentor):
    """``255 * (x / 255) ** (1 / (1 + g))`` with ``g`` drawn from ``range``; values are clipped to [0, 255].

    Integer images go through the reference's 256-entry truncated lookup table. Float images get the
    exact curve instead of the reference's quantisation to uint8, and keep their dtype.
    """

    def __init__(self, range: tuple[float, float] = (-0.5, 0.5)) -> None:
        super().__init__()
        if not -1 < range[0] <= range[1]:
            raise ValueError(f"Gamma needs range=(low, high) with -1 < low <= high, got {range!r}")
        self._init(locals())

    def _get_augment_params(self, _: np.ndarray) -> np.ndarray:
        return self._rand_range(*self.range)

    def _augment(self, img: np.ndarray, gamma: Any) -> np.ndarray:
        require_image(img, "Gamma")
        exponent = 1.0 / (1.0 + float(gamma))
        if img.dtype.kind == "f":
            out = np.clip(img, 0, PIXEL_MAX).astype(work_dtype(img.dtype), copy=False)
            out /= PIXEL_MAX
            out **= exponent
            out *= PIXEL_MAX
            return out.astype(img.dtype, copy=False)
        levels = np.arange(256, dtype=np.float32) / PIXEL_MAX
        lut = (levels ** np.float32(exponent) * PIXEL_MAX).astype(np.uint8)
        pixels = img if img.dtype == np.uint8 else np.clip(img, 0, PIXEL_MAX).astype(np.uint8)
        return keep_channel_axis(cv2.LUT(pixels, lut), img).astype(img.dtype, copy=False)


class Clip(PhotometricAugmentor):
    """Clip pixel values to [min, max]; the dtype is kept."""

    def __init__(self, min: float = 0, max: float = 255) -> None:
        super().__init__()
        self._init(locals())

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        return np.clip(img, self.min, self.max)


class Saturation(AffineColourAugmentor):
    """``x * v + grey * (1 - v)`` with ``v = 1 + U(-alpha, alpha)`` (as fb.resnet.torch).

    Needs HxWx3 uint8 or float32 input; the grey image is BGR's (RGB's with ``rgb=True``).
    """

    def __init__(self, alpha: float = 0.4, rgb: bool = True, clip: bool = True) -> None:
        super().__init__()
        if not alpha < 1:
            raise ValueError(f"Saturation needs alpha < 1, got {alpha!r}")
        rgb = bool(rgb)
        self._init(locals())

    def _get_augment_params(self, _: np.ndarray) -> np.ndarray:
        return 1 + self._rand_range(-self.alpha, self.alpha)

    def _augment(self, img: np.ndarray, v: Any) -> np.ndarray:
        require_image(img, "Saturation", channels=(3,), dtypes=_COLOUR_DTYPES)
        v = np.float32(v)
        grey = cv2.cvtColor(img, _grey_code(self.rgb))
        if grey.dtype == np.float32:
            grey *= 1 - v
        else:
            grey = np.multiply(grey, 1 - v, dtype=np.float32)
        out = np.multiply(img, v, dtype=np.float32)
        out += cv2.cvtColor(grey, cv2.COLOR_GRAY2BGR)  # grey in all three channels: faster than broadcasting
        return finish(out, img.dtype, self.clip)

    def _colour_affine(self, v: Any, mean: Any) -> Affine:
        return affine_blend(np.float32(v), grey_weights(self.rgb))


class Lighting(AffineColourAugmentor):
    """AlexNet's PCA lighting noise (as fb.resnet.torch): add ``eigvec @ (a * eigval)`` to every pixel,
    with ``a ~ N(0, std^2)`` per component.

    ``eigval`` has shape (3,), ``eigvec`` (3, 3) with one eigenvector per column; both are kept as
    float32. Needs HxWx3 input.
    """

    def __init__(self, std: float, eigval: Any, eigvec: Any, clip: bool = True) -> None:
        super().__init__()
        eigval = np.asarray(eigval, dtype=np.float32)
        eigvec = np.asarray(eigvec, dtype=np.float32)
        if eigval.shape != (3,) or eigvec.shape != (3, 3):
            raise ValueError(
                f"Lighting needs eigval of shape (3,) and eigvec of shape (3, 3), "
                f"got {eigval.shape} and {eigvec.shape}"
            )
        self._init(locals())

    def _get_augment_params(self, img: np.ndarray) -> np.ndarray:
        require_image(img, "Lighting", channels=(3,))
        return (self.rng.randn(3) * self.std).astype(np.float32)

    def _shift(self, v: Any) -> np.ndarray:
        weights = (np.asarray(v, dtype=np.float32) * self.eigval).reshape((3, 1))
        return np.dot(self.eigvec, weights).reshape((3,))

    def _augment(self, img: np.ndarray, v: Any) -> np.ndarray:
        require_image(img, "Lighting", channels=(3,))
        out = add_per_channel(img, self._shift(v), work_dtype(img.dtype))
        return finish(out, img.dtype, self.clip)

    def _colour_affine(self, v: Any, mean: Any) -> Affine:
        return affine_scale(1.0, self._shift(v).tolist())


class MinMaxNormalize(PhotometricAugmentor):
    """Rescale linearly so the image (or each channel) spans [min, max]; float32 out.

    A constant image (or channel) becomes ``min`` everywhere; the reference divided by zero.
    """

    def __init__(self, min: float = 0, max: float = 255, all_channel: bool = True) -> None:
        super().__init__()
        self._init(locals())

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        require_image(img, "MinMaxNormalize")
        out = img.astype(np.float32)
        axis = None if self.all_channel else (0, 1)
        low = np.min(out, axis=axis, keepdims=True)
        span = np.max(out, axis=axis, keepdims=True) - low
        span[span == 0] = 1
        out -= low
        out *= self.max - self.min
        out /= span
        out += self.min
        return out
