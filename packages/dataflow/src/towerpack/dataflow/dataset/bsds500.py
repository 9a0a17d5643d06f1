"""BSDS500: the Berkeley segmentation images with their boundary ground truth (needs scipy and cv2).

Datapoints are ``[BGR uint8 (321, 481, 3), float32 (321, 481) in [0, 1]]``: the label is the mean
of the annotators' boundary maps. Portrait images (and their labels) are transposed to landscape,
as in the reference. Unlike the reference, images are read in sorted file order (its glob order
differed between machines, which breaks a job-wide epoch order).
"""

from __future__ import annotations

import glob
import os
from typing import Any

import numpy as np

from .base import ArrayDataset
from .files import DatasetFormatError, Split, get_dataset_path, load_mat, require_files

__all__ = ["BSDS500"]

DATA_URL = "http://www.eecs.berkeley.edu/Research/Projects/CS/vision/grouping/BSR/BSR_bsds500.tgz"
IMG_H, IMG_W = 321, 481


def _boundaries(path: str) -> np.ndarray:
    """The mean boundary map of the annotators in the groundTruth ``.mat`` file ``path``."""
    gt = load_mat(path, "BSDS500").get("groundTruth")
    try:
        maps = [np.asarray(a["Boundaries"][0][0], np.float32) for a in gt[0]]
    except (TypeError, KeyError, IndexError, ValueError) as e:
        raise DatasetFormatError(f"{path}: expected a groundTruth cell array with Boundaries ({e})") from None
    if not maps:
        raise DatasetFormatError(f"{path}: groundTruth has no annotations")
    return sum(maps) / np.float32(len(maps))


class BSDS500(ArrayDataset):
    """BSDS500 edge detection data; see the module docstring.

    Args:
        name: ``"train"``, ``"test"`` or ``"val"``.
        data_dir: the directory holding the extracted ``BSR/`` (default ``$TENSORPACK_DATASET/bsds500_data``).
        shuffle: shuffle every epoch.
        shard, seed, remainder, rank, world_size: see :class:`IndexedDataset`.
    """

    _columns = ("data", "label")

    def __init__(
        self,
        name: str,
        data_dir: str | None = None,
        shuffle: bool = True,
        **order: Any,
    ) -> None:
        from ..image.decode import read_image

        split = Split.parse(name, (Split.TRAIN, Split.TEST, Split.VAL), "BSDS500")
        self.data_dir = get_dataset_path("bsds500_data") if data_dir is None else os.path.expanduser(data_dir)
        self.data_root = os.path.join(self.data_dir, "BSR", "BSDS500", "data")
        image_dir = os.path.join(self.data_root, "images", split.value)
        gt_dir = os.path.join(self.data_root, "groundTruth", split.value)
        how = f"Download {DATA_URL} and extract it in {os.path.abspath(self.data_dir)} (it holds BSR/)."
        require_files("BSDS500", [image_dir, gt_dir], how)
        files = sorted(glob.glob(os.path.join(image_dir, "*.jpg")))
        gt_files = [os.path.join(gt_dir, os.path.basename(f).split(".")[0] + ".mat") for f in files]
        require_files("BSDS500", gt_files, how)
        self.data = np.zeros((len(files), IMG_H, IMG_W, 3), np.uint8)
        self.label = np.zeros((len(files), IMG_H, IMG_W), np.float32)
        for i, (f, g) in enumerate(zip(files, gt_files, strict=True)):
            im, gt = read_image(f), _boundaries(g)
            if im.shape[0] > im.shape[1]:
                im = im.transpose(1, 0, 2)
            if gt.shape[0] > gt.shape[1]:
                gt = gt.T
            if im.shape[:2] != (IMG_H, IMG_W) or gt.shape != (IMG_H, IMG_W):
                raise DatasetFormatError(
                    f"{f}: image {im.shape[:2]} / ground truth {gt.shape}, expected {(IMG_H, IMG_W)}"
                )
            self.data[i], self.label[i] = im, gt
        self._init_split_order(split, shuffle, **order)
