"""ILSVRC12 (ImageNet) and TinyImageNet: image directories, their label lists and the caffe meta files.

``ILSVRCMeta`` reads the files of caffe's ``caffe_ilsvrc12.tar.gz`` (synsets.txt, whose line order
is the label map, synset_words.txt, {train,val,test}.txt, imagenet_mean.binaryproto).
``ILSVRC12Files`` yields ``[path, label]``, ``ILSVRC12`` and ``TinyImageNet`` ``[BGR uint8 HxWx3,
int]`` decoded with cv2 (a corrupt image is an error naming the file).

Fixed from the reference: ``guess_dir_structure`` looks at every entry (not one arbitrary
entry); ``get_per_pixel_mean`` parses the binaryproto itself (no protoc, no ``imp``);
``get_training_bbox`` works on Python 3.
"""

from __future__ import annotations

import enum
import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import IndexedDataset, LabelledImageFiles, read_labelled_image
from .blobproto import read_blobproto
from .files import DatasetFormatError, Split, get_dataset_path, require_files

__all__ = ["ILSVRC12", "DirStructure", "ILSVRC12Files", "ILSVRCMeta", "TinyImageNet"]

CAFFE_ILSVRC12_URL = "http://dl.caffe.berkeleyvision.org/caffe_ilsvrc12.tar.gz"
IMAGENET_URL = "https://image-net.org/download-images.php"
TINY_IMAGENET_URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"

_SPLITS = (Split.TRAIN, Split.VAL, Split.TEST)
_IMAGE_EXTENSIONS = (".jpeg", ".jpg", ".png")


class DirStructure(enum.StrEnum):
    """The two layouts of ``val/``: ``ORIGINAL`` (flat, as extracted) or ``TRAIN`` (``val/<wnid>/``)."""

    ORIGINAL = "original"
    TRAIN = "train"

    @classmethod
    def parse(cls, value: DirStructure | str) -> DirStructure:
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"dir_structure must be 'original' or 'train', got {value!r}") from None


def _meta_dir(dir: str | None) -> str:
    return get_dataset_path("ilsvrc_metadata") if dir is None else os.path.expanduser(dir)


def _meta_how_to_get(meta_dir: str) -> str:
    return (
        f"Download {CAFFE_ILSVRC12_URL} and extract it in {os.path.abspath(meta_dir)} (it holds "
        f"{', '.join(ILSVRCMeta.FILES)} and imagenet_mean.binaryproto)."
    )


def _read_lines(path: str) -> list[str]:
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


class ILSVRCMeta:
    """The ILSVRC12 metadata of caffe's ``caffe_ilsvrc12.tar.gz``, in ``dir`` (default
    ``$TENSORPACK_DATASET/ilsvrc_metadata``)."""

    FILES = ("synsets.txt", "synset_words.txt", "train.txt", "val.txt", "test.txt")

    def __init__(self, dir: str | None = None) -> None:
        self.dir = _meta_dir(dir)
        self._require("synsets.txt")

    def _require(self, *names: str) -> None:
        require_files(
            type(self).__name__, [os.path.join(self.dir, n) for n in names], _meta_how_to_get(self.dir)
        )

    def get_synset_1000(self) -> dict[int, str]:
        """``{label: wnid}``; the line order of synsets.txt is the label map."""
        self._require("synsets.txt")
        return dict(enumerate(_read_lines(os.path.join(self.dir, "synsets.txt"))))

    def get_synset_words_1000(self) -> dict[int, str]:
        """``{label: "wnid words, ..."}``, the full lines of synset_words.txt."""
        self._require("synset_words.txt")
        return dict(enumerate(_read_lines(os.path.join(self.dir, "synset_words.txt"))))

    def get_image_list(
        self, name: str, dir_structure: DirStructure | str = DirStructure.ORIGINAL
    ) -> list[tuple[str, int]]:
        """``[(path relative to the split's directory, label)]`` of ``<name>.txt``.

        With the ``"train"`` structure, val/test paths get their ``<wnid>/`` prefix. test.txt's
        labels are not ground truth.
        """
        split = Split.parse(name, _SPLITS, "ILSVRCMeta")
        dir_structure = DirStructure.parse(dir_structure)
        self._require(f"{split.value}.txt")
        path = os.path.join(self.dir, f"{split.value}.txt")
        synsets = None
        if split is not Split.TRAIN and dir_structure is DirStructure.TRAIN:
            synsets = self.get_synset_1000()
        out = []
        for lineno, line in enumerate(_read_lines(path), 1):
            parts = line.split()
            if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
                raise DatasetFormatError(f"{path}:{lineno}: expected 'relative/path label', got {line!r}")
            rel, label = parts[0], int(parts[1])
            if synsets is not None:
                if label not in synsets:
                    raise DatasetFormatError(f"{path}:{lineno}: label {label} is not in synsets.txt")
                rel = os.path.join(synsets[label], rel)
            out.append((rel, label))
        if not out:
            raise DatasetFormatError(f"{path}: the image list is empty")
        return out

    def get_per_pixel_mean(self, size: Sequence[int] | None = None) -> np.ndarray:
        """The float32 ``(h, w, 3)`` BGR mean image in [0, 255] (256x256, or ``size=(h, w)`` resized)."""
        self._require("imagenet_mean.binaryproto")
        path = os.path.join(self.dir, "imagenet_mean.binaryproto")
        blob = read_blobproto(path)
        if blob.ndim == 4:
            blob = blob[0]
        if blob.ndim != 3:
            raise DatasetFormatError(f"{path}: expected a (channels, height, width) blob, got {blob.shape}")
        arr = np.ascontiguousarray(blob.transpose(1, 2, 0))
        if size is not None:
            import cv2

            arr = cv2.resize(arr, (int(size[1]), int(size[0])))
        return arr

    @staticmethod
    def guess_dir_structure(dir: str) -> DirStructure:
        """``"train"`` if ``dir`` holds ``n*`` subdirectories, ``"original"`` if it holds image files.

        Every entry is looked at; other files (a README, ``.DS_Store``) do not count.
        """
        try:
            entries = list(os.scandir(dir))
        except FileNotFoundError:
            raise FileNotFoundError(f"ILSVRC12: directory {dir} does not exist") from None
        wnid_dirs = any(e.name.startswith("n") and e.is_dir() for e in entries)
        images = any(e.name.lower().endswith(_IMAGE_EXTENSIONS) and e.is_file() for e in entries)
        if wnid_dirs and images:
            raise ValueError(
                f"ILSVRC12: {dir} holds both n* subdirectories and image files; pass dir_structure='train' "
                "(val/<wnid>/*.JPEG) or 'original' (flat val/*.JPEG)"
            )
        return DirStructure.TRAIN if wnid_dirs else DirStructure.ORIGINAL


class ILSVRC12Files(IndexedDataset):
    """ILSVRC12 as ``[full image path, int label 0..999]``, for decoding elsewhere.

    Args:
        dir: the directory holding ``train/``, ``val/`` and ``test/`` (see :class:`ILSVRC12`).
        name: ``"train"``, ``"val"`` or ``"test"``.
        meta_dir: the :class:`ILSVRCMeta` directory (default ``$TENSORPACK_DATASET/ilsvrc_metadata``).
        shuffle: shuffle every epoch; default: for the training split.
        dir_structure: ``"original"`` or ``"train"``: the layout of ``val/``; guessed when None
            (the training split is always ``train/<wnid>/``).
        shard, seed, remainder, rank, world_size: see :class:`IndexedDataset`.
    """

    def __init__(
        self,
        dir: str,
        name: str,
        meta_dir: str | None = None,
        shuffle: bool | None = None,
        dir_structure: DirStructure | str | None = None,
        **order: Any,
    ) -> None:
        split = Split.parse(name, _SPLITS, type(self).__name__)
        self.name = split.value
        self.full_dir = os.path.join(os.path.expanduser(dir), split.value)
        meta_dir = _meta_dir(meta_dir)
        # Everything this split needs, checked at once so that one error names all that is missing.
        require_files(
            type(self).__name__,
            [
                os.path.join(meta_dir, "synsets.txt"),
                os.path.join(meta_dir, f"{split.value}.txt"),
                self.full_dir,
            ],
            f"{_meta_how_to_get(meta_dir)}\nDownload the ILSVRC2012 images from {IMAGENET_URL} and extract "
            f"the {split.value} tar into {os.path.abspath(self.full_dir)} "
            "(train/<wnid>/*.JPEG; val/ and test/ flat).",
        )
        meta = ILSVRCMeta(meta_dir)
        if split is Split.TRAIN:
            dir_structure = DirStructure.TRAIN
        elif dir_structure is None:
            dir_structure = ILSVRCMeta.guess_dir_structure(self.full_dir)
        self.dir_structure = DirStructure.parse(dir_structure)
        self.imglist = meta.get_image_list(split.value, self.dir_structure)
        # Like the reference, check a few files now; checking 1.28M would take minutes on slow disks.
        require_files(
            type(self).__name__,
            [os.path.join(self.full_dir, rel) for rel, _ in self.imglist[:10]],
            f"{self.full_dir} does not match {split.value}.txt of {meta.dir} "
            f"(dir_structure={self.dir_structure.value!r}).",
        )
        self._init_split_order(split, shuffle, **order)

    def _count(self) -> int:
        return len(self.imglist)

    def _get(self, index: int) -> list[Any]:
        rel, label = self.imglist[index]
        return [os.path.join(self.full_dir, rel), label]


class ILSVRC12(ILSVRC12Files):
    """ILSVRC12 as ``[BGR uint8 (h, w, 3) of the image's size, int label 0..999]``.

    ``dir`` holds ``train/<wnid>/<wnid>_<k>.JPEG``, ``val/ILSVRC2012_val_%08d.JPEG`` (or
    ``val/<wnid>/...`` with ``dir_structure="train"``) and ``test/`` (flat); arguments as
    :class:`ILSVRC12Files`.
    """

    def _get(self, index: int) -> list[Any]:
        return read_labelled_image(*super()._get(index))

    @staticmethod
    def get_training_bbox(bbox_dir: str, imglist: Sequence[tuple[str, int]]) -> list[np.ndarray | None]:
        """The first box of each image's VOC XML in ``bbox_dir`` as float32 (xmin, ymin, xmax, ymax).

        ``None`` for images without a readable box file (``<relpath minus JPEG>xml``).
        """
        out: list[np.ndarray | None] = []
        for rel, _ in imglist:
            path = os.path.join(bbox_dir, os.path.splitext(rel)[0] + ".xml")
            try:
                box = ET.parse(path).getroot().find("object/bndbox")
                coords = [float(box.find(k).text) for k in ("xmin", "ymin", "xmax", "ymax")]
            except (OSError, ET.ParseError, AttributeError, TypeError, ValueError):
                out.append(None)
                continue
            out.append(np.asarray(coords, dtype=np.float32))
        return out


class TinyImageNet(LabelledImageFiles):
    """Tiny ImageNet (200 classes): ``[BGR uint8 (64, 64, 3), int label 0..199]``.

    Args:
        dir: the extracted ``tiny-imagenet-200/``: ``wnids.txt`` (its order is the label map),
            ``train/<wnid>/images/*``, ``val/val_annotations.txt`` and ``val/images/*``.
        name: ``"train"`` or ``"val"``.
        shuffle: shuffle every epoch; default: for the training split.
        shard, seed, remainder, rank, world_size: see :class:`IndexedDataset`.
    """

    NUM_CLASSES = 200

    def __init__(
        self,
        dir: str,
        name: str,
        shuffle: bool | None = None,
        **order: Any,
    ) -> None:
        split = Split.parse(name, (Split.TRAIN, Split.VAL), "TinyImageNet")
        self.dir = os.path.expanduser(dir)
        self.name = split.value
        how = f"Download {TINY_IMAGENET_URL} and extract it; pass the tiny-imagenet-200 directory as dir."
        wnids_file = os.path.join(self.dir, "wnids.txt")
        ann_file = os.path.join(self.dir, "val", "val_annotations.txt")
        require_files("TinyImageNet", [wnids_file, ann_file if split is Split.VAL else self.dir], how)
        self.wnids = _read_lines(wnids_file)
        if len(self.wnids) != self.NUM_CLASSES or len(set(self.wnids)) != self.NUM_CLASSES:
            raise DatasetFormatError(
                f"{wnids_file}: expected {self.NUM_CLASSES} distinct wnids, got {len(self.wnids)} "
                f"({len(set(self.wnids))} distinct)"
            )
        labels = {w: i for i, w in enumerate(self.wnids)}
        self.imglist: list[tuple[str, int]] = []
        if split is Split.TRAIN:
            dirs = [os.path.join(self.dir, "train", w, "images") for w in self.wnids]
            require_files("TinyImageNet", dirs, how)
            for w, d in zip(self.wnids, dirs, strict=True):
                self.imglist += [(os.path.join(d, f), labels[w]) for f in sorted(os.listdir(d))]
        else:
            for lineno, line in enumerate(_read_lines(ann_file), 1):
                parts = line.split()
                if len(parts) < 2 or parts[1] not in labels:
                    raise DatasetFormatError(f"{ann_file}:{lineno}: expected 'file wnid ...', got {line!r}")
                self.imglist.append((os.path.join(self.dir, "val", "images", parts[0]), labels[parts[1]]))
        self.class_names = self.wnids
        self._init_split_order(split, shuffle, **order)
