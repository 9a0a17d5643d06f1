"""Images for the image GANs of this folder, drawn on the fly (no download): one filled circle,
square or triangle per image, of random size, place and colour, on a black background."""

from __future__ import annotations

import enum

import cv2
import numpy as np

from towerpack.dataflow import RNGDataFlow

__all__ = ["Shape", "ShapesData", "draw_shape"]


class Shape(enum.Enum):
    CIRCLE = "circle"
    SQUARE = "square"
    TRIANGLE = "triangle"


def draw_shape(rng: np.random.RandomState, size: int = 32) -> np.ndarray:
    """One ``[size, size, 3]`` uint8 RGB image with one shape filling 25% to 70% of its width."""
    image = np.zeros((size, size, 3), np.uint8)
    radius = rng.uniform(0.125, 0.35) * size
    cx, cy = rng.uniform(radius, size - radius, size=2)
    # A saturated colour: a random hue at full saturation and value, through OpenCV's HSV (hue 0..179).
    hsv = np.array([[[rng.randint(180), 255, 255]]], np.uint8)
    colour = [int(c) for c in cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, 0]]
    shape = list(Shape)[rng.randint(len(Shape))]
    # Sub-pixel coordinates (shift=4: sixteenths of a pixel), anti-aliased edges.
    fixed = lambda *xy: [round(v * 16) for v in xy]
    if shape is Shape.CIRCLE:
        cv2.circle(image, fixed(cx, cy), round(radius * 16), colour, -1, cv2.LINE_AA, shift=4)
    else:
        corners = 4 if shape is Shape.SQUARE else 3
        angles = rng.uniform(0, 2 * np.pi) + 2 * np.pi * np.arange(corners) / corners
        points = np.stack([cx + radius * np.cos(angles), cy + radius * np.sin(angles)], axis=1)
        cv2.fillPoly(image, [np.round(points * 16).astype(np.int32)], colour, cv2.LINE_AA, shift=4)
    return image


class ShapesData(RNGDataFlow):
    """Endless datapoints ``[image]``: ``[size, size, 3]`` uint8 RGB images of ``draw_shape``.

    Each process draws its own stream (seeded by ``reset_state``), so data-parallel ranks see
    different images without sharding.
    """

    def __init__(self, size: int = 32, seed: int | None = None):
        if size < 8:
            raise ValueError(f"image size must be at least 8 pixels, got {size}")
        self.size = int(size)
        self.seed = seed

    def __iter__(self):
        while True:
            yield [draw_shape(self.rng, self.size)]
