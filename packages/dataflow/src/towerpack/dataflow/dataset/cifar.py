"""Cifar10 and Cifar100: the official "python version" pickled batches, loaded into memory.

Datapoints are ``[uint8 (32, 32, 3) RGB, int]``. The batches are pickles, as the official files
are; they are only read from the user's own data directory (a pickle can run code when loaded).

Fixed from the reference: the record count comes from each file (the reference hard-coded it,
and for CIFAR-100 looked for "train" anywhere in the path); the mean helpers default to the
training split only (the reference included the test set).
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import IndexedDataset
from .files import DatasetFormatError, Split, get_dataset_path, require_files

__all__ = ["Cifar10", "Cifar100", "CifarBase"]

_URLS = {
    10: "http://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
    100: "http://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
}
_FOLDERS = {10: "cifar-10-batches-py", 100: "cifar-100-python"}
_FILES = {
    10: {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"], "meta": "batches.meta"},
    100: {"train": ["train"], "test": ["test"], "meta": "meta"},
}
_LABEL_KEYS = {10: (b"labels", "label_names"), 100: (b"fine_labels", "fine_label_names")}


def _load_pickle(path: str) -> Any:
    try:
        with open(path, "rb") as f:
            return pickle.load(f, encoding="bytes")
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
        ImportError,
        KeyError,
        IndexError,
        OverflowError,
    ) as e:  # what a cut or damaged pickle raises
        raise DatasetFormatError(f"{path}: not a CIFAR python pickle ({type(e).__name__}: {e})") from None


def _text(value: Any) -> Any:
    return value.decode("latin1") if isinstance(value, bytes) else value


def read_cifar_batch(path: str, classnum: int) -> tuple[np.ndarray, list[int]]:
    """``(uint8 (N, 32, 32, 3) RGB images, N int labels)`` of one batch file."""
    batch = _load_pickle(path)
    label_key = _LABEL_KEYS[classnum][0]
    if not isinstance(batch, dict) or b"data" not in batch or label_key not in batch:
        keys = sorted(batch) if isinstance(batch, dict) else type(batch).__name__
        raise DatasetFormatError(f"{path}: expected a dict with b'data' and {label_key!r}, got {keys}")
    data = np.asarray(batch[b"data"])
    labels = [int(x) for x in batch[label_key]]
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072 or data.shape[0] != len(labels):
        raise DatasetFormatError(
            f"{path}: expected uint8 data of shape (N, 3072) and N labels, got {data.dtype} "
            f"{data.shape} and {len(labels)} labels"
        )
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), labels


class CifarBase(IndexedDataset):
    """CIFAR-10 or CIFAR-100 (``cifar_classnum``); see :class:`Cifar10`."""

    def __init__(
        self,
        train_or_test: str,
        shuffle: bool | None = None,
        dir: str | None = None,
        cifar_classnum: int = 10,
        **order: Any,
    ) -> None:
        if cifar_classnum not in _FOLDERS:
            raise ValueError(f"cifar_classnum must be 10 or 100, got {cifar_classnum!r}")
        name = f"Cifar{cifar_classnum}"
        split = Split.parse(train_or_test, (Split.TRAIN, Split.TEST), name)
        self.cifar_classnum = cifar_classnum
        self.train_or_test = split.value
        self.dir = get_dataset_path(f"cifar{cifar_classnum}_data") if dir is None else os.path.expanduser(dir)
        self.fs = self._paths(split.value)
        require_files(name, [*self.fs, self._meta_path()], self._how_to_get())
        images, labels = self._read(self.fs)
        self.data = [[img, label] for img, label in zip(images, labels, strict=True)]
        self._init_split_order(split, shuffle, **order)

    def _folder(self) -> str:
        return os.path.join(self.dir, _FOLDERS[self.cifar_classnum])

    def _paths(self, split: str) -> list[str]:
        return [os.path.join(self._folder(), f) for f in _FILES[self.cifar_classnum][split]]

    def _meta_path(self) -> str:
        return os.path.join(self._folder(), _FILES[self.cifar_classnum]["meta"])

    def _how_to_get(self) -> str:
        url = _URLS[self.cifar_classnum]
        folder = _FOLDERS[self.cifar_classnum]
        return f"Download {url} and extract it in {os.path.abspath(self.dir)} (it holds {folder}/)."

    def _read(self, paths: Sequence[str]) -> tuple[np.ndarray, list[int]]:
        parts = [read_cifar_batch(p, self.cifar_classnum) for p in paths]
        return np.concatenate([p[0] for p in parts]), [label for p in parts for label in p[1]]

    def _count(self) -> int:
        return len(self.data)

    def _get(self, index: int) -> list[Any]:
        img, label = self.data[index]
        return [img, label]

    def get_label_names(self) -> list[str]:
        """The name of each class (the fine labels for CIFAR-100)."""
        path = self._meta_path()
        meta = _load_pickle(path)
        key = _LABEL_KEYS[self.cifar_classnum][1]
        names = meta.get(key, meta.get(key.encode())) if isinstance(meta, dict) else None
        if names is None:
            raise DatasetFormatError(f"{path}: expected a dict with {key!r}")
        return [_text(n) for n in names]

    def get_per_pixel_mean(self, names: Sequence[str] = ("train",)) -> np.ndarray:
        """The float32 (32, 32, 3) RGB mean image of the splits ``names`` (default: training only)."""
        paths = []
        for n in names:
            paths += self._paths(Split.parse(n, (Split.TRAIN, Split.TEST), type(self).__name__).value)
        require_files(type(self).__name__, paths, self._how_to_get())
        images = self._read(paths)[0]
        return images.mean(axis=0, dtype=np.float64).astype(np.float32)

    def get_per_channel_mean(self, names: Sequence[str] = ("train",)) -> np.ndarray:
        """The float32 (3,) RGB mean of the splits ``names`` (default: training only)."""
        return self.get_per_pixel_mean(names).mean(axis=(0, 1))


class Cifar10(CifarBase):
    """CIFAR-10: ``[uint8 (32, 32, 3) RGB in [0, 255], int label 0..9]``; 50000 train, 10000 test.

    Args:
        train_or_test: ``"train"`` or ``"test"``.
        shuffle: shuffle every epoch; default: for the training split.
        dir: the directory holding ``cifar-10-batches-py/`` (default ``$TENSORPACK_DATASET/cifar10_data``).
        shard, seed, remainder, rank, world_size: see :class:`IndexedDataset`.
    """

    def __init__(
        self, train_or_test: str, shuffle: bool | None = None, dir: str | None = None, **kwargs: Any
    ):
        super().__init__(train_or_test, shuffle, dir, 10, **kwargs)


class Cifar100(CifarBase):
    """CIFAR-100: as :class:`Cifar10`, with the fine labels 0..99; ``dir`` holds ``cifar-100-python/``."""

    def __init__(
        self, train_or_test: str, shuffle: bool | None = None, dir: str | None = None, **kwargs: Any
    ):
        super().__init__(train_or_test, shuffle, dir, 100, **kwargs)
