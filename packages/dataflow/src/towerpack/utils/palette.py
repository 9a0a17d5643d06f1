"""``PALETTE_RGB``: 79 distinct colours for drawing instances, classes or boxes.

A float32 array of shape (79, 3), **RGB** order, values in [0, 255] (reverse the last axis for
OpenCV's BGR). The colours are made here (hues a golden-ratio turn apart, at three saturations and
three brightnesses); they are not the reference's table, which had the same shape and range.
"""

from __future__ import annotations

import colorsys

import numpy as np

__all__ = ["PALETTE_RGB"]

_COUNT = 79
_GOLDEN_TURN = (5**0.5 - 1) / 2
_SATURATIONS = (0.85, 0.55, 1.0)
_VALUES = (0.95, 0.75, 0.55)


def _colour(i: int) -> tuple[float, float, float]:
    hue = (i * _GOLDEN_TURN) % 1.0
    sat = _SATURATIONS[i % len(_SATURATIONS)]
    val = _VALUES[(i // len(_SATURATIONS)) % len(_VALUES)]
    return colorsys.hsv_to_rgb(hue, sat, val)


PALETTE_RGB = np.round(np.array([_colour(i) for i in range(_COUNT)]) * 255).astype(np.float32)
PALETTE_RGB.setflags(write=False)

#: The same colours as ``#rrggbb`` strings.
PALETTE_HEX = ["#{:02x}{:02x}{:02x}".format(*(int(c) for c in rgb)) for rgb in PALETTE_RGB]
