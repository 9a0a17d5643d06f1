"""SVHNDigit: the cropped-digit SVHN ``<name>_32x32.mat`` files, loaded into memory (needs scipy).

Fixed from the reference: its class-level cache was keyed by the split name alone, so a second
instance ignored ``data_dir``; here it is keyed by the file (path, size and modification time).
``get_per_pixel_mean`` defaults to the training split (the reference added test and extra).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from .base import ArrayDataset
from .files import DatasetFormatError, Split, get_dataset_path, load_mat, require_files

__all__ = ["SVHNDigit"]

SVHN_URL = "http://ufldl.stanford.edu/housenumbers/"
_SPLITS = (Split.TRAIN, Split.TEST, Split.EXTRA)


class SVHNDigit(ArrayDataset):
    """SVHN digits: ``[uint8 (32, 32, 3) RGB, numpy.uint8 label 0..9]`` (the files' 10 is digit 0).

    Args:
        name: ``"train"``, ``"test"`` or ``"extra"``.
        data_dir: the directory holding ``{train,test,extra}_32x32.mat`` (default
            ``$TENSORPACK_DATASET/svhn_data``).
        shuffle: shuffle every epoch.
        shard, seed, remainder, rank, world_size: see :class:`IndexedDataset`.
    """

    _columns = ("X", "Y")

    _Cache: ClassVar[dict[tuple[str, int, int], tuple[np.ndarray, np.ndarray]]] = {}

    def __init__(
        self,
        name: str,
        data_dir: str | None = None,
        shuffle: bool = True,
        **order: Any,
    ) -> None:
        split = Split.parse(name, _SPLITS, "SVHNDigit")
        self.name = split.value
        self.data_dir = get_dataset_path("svhn_data") if data_dir is None else os.path.expanduser(data_dir)
        self.X, self.Y = self._load(os.path.join(self.data_dir, f"{split.value}_32x32.mat"))
        self._init_order(
            shuffle,
            training=split is not Split.TEST,
            **order,
        )

    @classmethod
    def _load(cls, path: str) -> tuple[np.ndarray, np.ndarray]:
        require_files(
            "SVHNDigit", [path], f"Download {SVHN_URL}{os.path.basename(path)} into {os.path.dirname(path)}."
        )
        st = os.stat(path)
        key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
        if key not in cls._Cache:
            mat = load_mat(path, "SVHNDigit")
            x, y = mat.get("X"), mat.get("y")
            if x is None or y is None or x.ndim != 4 or x.shape[:3] != (32, 32, 3) or y.size != x.shape[3]:
                shapes = {k: getattr(v, "shape", None) for k, v in mat.items() if not k.startswith("__")}
                raise DatasetFormatError(
                    f"{path}: expected X (32, 32, 3, N) and y with N labels, got {shapes}"
                )
            images = np.ascontiguousarray(x.transpose(3, 0, 1, 2), dtype=np.uint8)
            labels = y.reshape(-1).astype(np.uint8)
            labels[labels == 10] = 0
            cls._Cache[key] = (images, labels)
        return cls._Cache[key]

    @staticmethod
    def get_per_pixel_mean(names: Sequence[str] = ("train",), data_dir: str | None = None) -> np.ndarray:
        """The float64 (32, 32, 3) RGB mean image of the splits ``names`` (default: training only)."""
        images = [SVHNDigit(n, data_dir, shuffle=False, shard=False).X for n in names]
        return np.concatenate(images).mean(axis=0)
