"""The pixel rules every photometric augmentor shares.

``finish`` is the reference's clip rule (compute in float, clip to [0, 255] when asked or when the
input is uint8, cast back to the input dtype with truncation), ``work_dtype`` the float type
arithmetic on an image happens in, ``channel_means``/``add_per_channel`` the fast per-channel
arithmetic, and ``require_image`` the input check that turns a wrong shape or dtype into an error
naming the augmentor instead of a cv2 traceback.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import cv2
import numpy as np

__all__ = ["PIXEL_MAX", "add_per_channel", "channel_means", "finish", "require_image", "work_dtype"]

#: The top of the pixel range every clip in this package uses, whatever the dtype (as the reference).
PIXEL_MAX = 255

_CV2_MEAN_DTYPES = tuple(np.dtype(d) for d in (np.uint8, np.uint16, np.int16, np.float32, np.float64))


def work_dtype(dtype: np.dtype) -> np.dtype:
    """The float type arithmetic on an image of ``dtype`` runs in: float32, or float64 for float64 input."""
    return np.result_type(dtype, np.float32)


def finish(out: np.ndarray, dtype: np.dtype, clip: bool) -> np.ndarray:
    """Clip ``out`` (a float array the caller owns) to [0, 255] in place if ``clip`` or ``dtype`` is uint8,
    then cast it to ``dtype`` (truncating toward zero, as ``astype`` does)."""
    if clip or dtype == np.uint8:
        np.clip(out, 0, PIXEL_MAX, out=out)
    return out.astype(dtype, copy=False)


def channel_means(img: np.ndarray) -> np.ndarray:
    """The mean of each channel of an HxWxC image, in float64 (cv2 is much faster than numpy here)."""
    if img.shape[2] <= 4 and img.dtype in _CV2_MEAN_DTYPES:
        return np.asarray(cv2.mean(img)[: img.shape[2]])
    return np.mean(img, axis=(0, 1), dtype=np.float64)


def add_per_channel(
    img: np.ndarray, values: Any, dtype: np.dtype, out: np.ndarray | None = None
) -> np.ndarray:
    """``img + values`` (one value per channel of an HxWxC image) computed in ``dtype``, into ``out``
    (which may be ``img`` itself, if contiguous) or a new array.

    numpy broadcasting over a short last axis is slow, so the values are tiled along a whole row.
    """
    h, w, c = img.shape
    values = np.asarray(values, dtype=dtype).reshape(c)
    if out is None:
        out = np.empty(img.shape, dtype)
    if not out.flags.c_contiguous:  # reshaping it would copy, and the sum would be lost
        return np.add(img, values, out=out, dtype=dtype)
    np.add(img.reshape(h, w * c), np.tile(values, w), out=out.reshape(h, w * c), dtype=dtype)
    return out


def require_image(
    img: Any,
    who: str,
    *,
    channels: Iterable[int] | None = None,
    dtypes: Iterable[Any] | None = None,
) -> None:
    """Raise unless ``img`` is an HxW or HxWxC array with an allowed channel count and dtype.

    ``channels`` lists the allowed channel counts (an HxW image has 1); ``dtypes`` the allowed dtypes.
    """
    if not isinstance(img, np.ndarray):
        raise TypeError(f"{who} needs a numpy array image, got {type(img).__name__}")
    if img.ndim not in (2, 3):
        raise ValueError(f"{who} needs an HxW or HxWxC image, got shape {img.shape}")
    if channels is not None:
        allowed = tuple(channels)
        n = 1 if img.ndim == 2 else img.shape[2]
        if n not in allowed:
            want = " or ".join(str(c) for c in allowed)
            raise ValueError(f"{who} needs an image with {want} channel(s), got shape {img.shape}")
    if dtypes is not None:
        allowed_dtypes = tuple(np.dtype(d) for d in dtypes)
        if img.dtype not in allowed_dtypes:
            want = " or ".join(str(d) for d in allowed_dtypes)
            raise TypeError(f"{who} needs a {want} image, got dtype {img.dtype}")
