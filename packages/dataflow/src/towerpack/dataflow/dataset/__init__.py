"""towerpack.dataflow.dataset: readers of the reference's datasets in their original on-disk formats.

Every reader is a sharding :class:`IndexedDataset` (see :mod:`.base`); nothing is downloaded (a
missing file raises :class:`DatasetNotFoundError` saying where to get it). Importing this package
is cheap: cv2 and scipy are imported when a reader needs them.
"""

from __future__ import annotations

from .base import IndexedDataset
from .bsds500 import BSDS500
from .caltech101 import Caltech101Silhouettes
from .cifar import Cifar10, Cifar100, CifarBase
from .files import DatasetFormatError, DatasetNotFoundError, get_dataset_path
from .ilsvrc import ILSVRC12, DirStructure, ILSVRC12Files, ILSVRCMeta, TinyImageNet
from .mnist import FashionMnist, Mnist
from .places import Places365Standard
from .svhn import SVHNDigit

__all__ = [
    "BSDS500",
    "ILSVRC12",
    "Caltech101Silhouettes",
    "Cifar10",
    "Cifar100",
    "CifarBase",
    "DatasetFormatError",
    "DatasetNotFoundError",
    "DirStructure",
    "FashionMnist",
    "ILSVRC12Files",
    "ILSVRCMeta",
    "IndexedDataset",
    "Mnist",
    "Places365Standard",
    "SVHNDigit",
    "TinyImageNet",
    "get_dataset_path",
]
