"""Caltech101Silhouettes: the 28x28 silhouettes of ``caltech101_silhouettes_28_split1.mat`` (needs scipy).

Datapoints are ``[image (28, 28) as stored, label 0..100]``. Unlike the reference, the record count
comes from the file (the reference hard-coded 4100 / 2307 / 2264).
"""

from __future__ import annotations

import os
from typing import Any

from .base import ArrayDataset
from .files import DatasetFormatError, Split, get_dataset_path, load_mat, require_files

__all__ = ["Caltech101Silhouettes"]

SOURCE_URL = "https://people.cs.umass.edu/~marlin/data/"
FILE_NAME = "caltech101_silhouettes_28_split1.mat"


class Caltech101Silhouettes(ArrayDataset):
    """Caltech 101 silhouettes; see the module docstring.

    Args:
        name: ``"train"``, ``"test"`` or ``"val"``.
        shuffle: shuffle every epoch.
        dir: the directory holding the ``.mat`` file (default ``$TENSORPACK_DATASET/caltech101_data``).
        shard, seed, remainder, rank, world_size: see :class:`IndexedDataset`.
    """

    _columns = ("images", "labels")

    def __init__(
        self,
        name: str,
        shuffle: bool = True,
        dir: str | None = None,
        **order: Any,
    ) -> None:
        split = Split.parse(name, (Split.TRAIN, Split.TEST, Split.VAL), "Caltech101Silhouettes")
        self.name = split.value
        self.dir = get_dataset_path("caltech101_data") if dir is None else os.path.expanduser(dir)
        path = os.path.join(self.dir, FILE_NAME)
        require_files("Caltech101Silhouettes", [path], f"Download {SOURCE_URL}{FILE_NAME} into {self.dir}.")
        mat = load_mat(path, "Caltech101Silhouettes")
        data, labels = mat.get(f"{split.value}_data"), mat.get(f"{split.value}_labels")
        if (
            data is None
            or labels is None
            or data.ndim != 2
            or data.shape[1] != 784
            or labels.size != len(data)
        ):
            raise DatasetFormatError(
                f"{path}: expected {split.value}_data (N, 784) and {split.value}_labels with N labels"
            )
        self.images = data.reshape(-1, 28, 28)
        self.labels = labels.ravel() - 1
        self._init_split_order(split, shuffle, **order)
