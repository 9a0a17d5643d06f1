"""Mnist and FashionMnist: the gzip IDX files of the original distributions, loaded into memory.

Datapoints are ``[float32 (28, 28) in [0, 1], numpy.uint8 label]`` as in the reference. The IDX
headers are checked (magic number, counts, sizes): a wrong or truncated file is an error naming it.
"""

from __future__ import annotations

import gzip
import os
import zlib
from typing import Any

import numpy as np

from .base import ArrayDataset
from .files import DatasetFormatError, Split, get_dataset_path, require_files

__all__ = ["FashionMnist", "Mnist", "read_idx"]

_IMAGES_MAGIC = 2051
_LABELS_MAGIC = 2049


def read_idx(path: str, magic: int) -> np.ndarray:
    """The uint8 array of the gzip IDX file ``path``, whose header must carry ``magic``.

    Images (magic 2051) come back as ``(count, rows, cols)``, labels (2049) as ``(count,)``.
    """
    ndim = magic & 0xFF
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError, zlib.error) as e:
        raise DatasetFormatError(f"{path}: not a complete gzip file ({e})") from None
    got_magic = int.from_bytes(raw[:4], "big") if len(raw) >= 4 else None
    if got_magic != magic:
        raise DatasetFormatError(f"{path}: IDX magic number is {got_magic}, expected {magic}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DatasetFormatError(f"{path}: {len(raw)} bytes, shorter than an IDX header of {header} bytes")
    dims = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    size = int(np.prod(dims))
    if len(raw) - header != size:
        raise DatasetFormatError(
            f"{path}: header says {'x'.join(map(str, dims))} = {size} bytes of data, "
            f"the file holds {len(raw) - header}"
        )
    return np.frombuffer(raw, np.uint8, offset=header).reshape(dims)


class Mnist(ArrayDataset):
    """MNIST digits: ``[float32 (28, 28) in [0, 1], numpy.uint8 label 0..9]``; 60000 train, 10000 test.

    Args:
        train_or_test: ``"train"`` or ``"test"``.
        shuffle: shuffle every epoch (both splits, as in the reference).
        dir: the directory holding the four ``*-idx?-ubyte.gz`` files (default
            ``$TENSORPACK_DATASET/mnist_data``).
        shard, seed, remainder, rank, world_size: see :class:`IndexedDataset`.
    """

    _columns = ("images", "labels")

    DIR_NAME = "mnist_data"
    SOURCE_URL = "http://yann.lecun.com/exdb/mnist/"
    LABEL_NAMES: tuple[str, ...] = tuple(str(i) for i in range(10))

    def __init__(
        self,
        train_or_test: str,
        shuffle: bool = True,
        dir: str | None = None,
        **order: Any,
    ) -> None:
        name = type(self).__name__
        split = Split.parse(train_or_test, (Split.TRAIN, Split.TEST), name)
        self.train_or_test = split.value
        self.dir = get_dataset_path(self.DIR_NAME) if dir is None else os.path.expanduser(dir)
        prefix = "train" if split is Split.TRAIN else "t10k"
        image_file = os.path.join(self.dir, f"{prefix}-images-idx3-ubyte.gz")
        label_file = os.path.join(self.dir, f"{prefix}-labels-idx1-ubyte.gz")
        require_files(
            name,
            [image_file, label_file],
            f"Download them from {self.SOURCE_URL} into {os.path.abspath(self.dir)} (keep them gzipped).",
        )
        images = read_idx(image_file, _IMAGES_MAGIC)
        self.labels = read_idx(label_file, _LABELS_MAGIC)
        if images.shape[0] != self.labels.shape[0]:
            raise DatasetFormatError(
                f"{image_file} holds {images.shape[0]} images but {label_file} holds "
                f"{self.labels.shape[0]} labels"
            )
        self.images = images.astype(np.float32) / 255.0
        self._init_split_order(split, shuffle, **order)

    def get_label_names(self) -> list[str]:
        """The name of each class."""
        return list(self.LABEL_NAMES)


class FashionMnist(Mnist):
    """Fashion-MNIST: the same files and datapoints as :class:`Mnist`, 10 kinds of clothing."""

    DIR_NAME = "fashion_mnist_data"
    SOURCE_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
    LABEL_NAMES = (
        "T-shirt/top",
        "Trouser",
        "Pullover",
        "Dress",
        "Coat",
        "Sandal",
        "Shirt",
        "Sneaker",
        "Bag",
        "Ankle boot",
    )
