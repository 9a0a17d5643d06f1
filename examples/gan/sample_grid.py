"""SampleGrid: a callback that shows how a generator improves, as PNG grids in the log directory.

At every trigger (by default the end of each epoch) it runs the generator through a prediction
tower (inference mode: BatchNorm uses its moving averages) on the same fixed noise vectors and
writes ``samples-<global step>.png``; TensorBoard gets the grid as the image ``samples``.
"""

from __future__ import annotations

import os

import cv2
import numpy as np
from gan_base import RandomZData

from towerpack.trainer import Callback, logger
from towerpack.utils.viz import stack_patches

__all__ = ["SampleGrid"]


class SampleGrid(Callback):
    """Write a ``rows`` x ``cols`` grid of generated images to the log directory at every trigger.

    Args:
        z_dim: the length of the generator's noise vectors (uniform in [-1, 1), as ``RandomZData``).
        input_name, output_name: the tower's noise tensor (fed) and generated images in [-1, 1].
    """

    def __init__(self, z_dim: int, rows: int = 8, cols: int = 8, input_name="z", output_name="gen/gen"):
        self.rows, self.cols = int(rows), int(cols)
        self.names = ([input_name], [output_name])
        zs = RandomZData((self.rows * self.cols, int(z_dim)), seed=0)
        zs.reset_state()
        (self.z,) = next(iter(zs))
        self.written: list[str] = []

    def _setup_graph(self):
        self.directory = logger.require_logger_dir(type(self).__name__)
        self._generate = self.trainer.get_predictor(*self.names)

    def _trigger(self):
        (images,) = self._generate(self.z)
        images = np.clip((images + 1.0) * 127.5, 0, 255).astype(np.uint8)
        # RGB images, 2 black pixels apart; OpenCV writes BGR.
        grid = stack_patches(images[..., ::-1], self.rows, self.cols, border=2, bgcolor=0)
        path = os.path.join(self.directory, f"samples-{self.global_step}.png")
        cv2.imwrite(path, grid)
        self.written.append(path)
        self.trainer.monitors.put_image("samples", grid[..., ::-1])
