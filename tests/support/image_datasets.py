"""Writers of small image datasets in the exact on-disk formats of the originals, for tests and benchmarks.

Each ``write_*`` function writes into a given directory the files a reader of
``towerpack.dataflow.dataset`` expects (same names, layout, encodings, keys, dtypes) and returns
what it wrote, so tests can check a reader against it. Images come from :func:`synthetic_photo`:
smooth gradients, shapes and mild noise (decoding cost like a photo, unlike white noise), with the
class drawn as a grating whose orientation encodes the label, so a tiny model can learn it and
:func:`label_from_photo` can read it back.

All writers are deterministic for a ``seed``. Image sizes are small by default (48-96 px, varying
aspect); ``imagenet_like=True`` gives ImageNet-like ~500x375 photos of about 100 KB each.
"""

from __future__ import annotations

import gzip
import os
import pickle
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import cv2
import numpy as np

__all__ = [
    "ArraySplits",
    "ImageFiles",
    "encode_jpeg",
    "label_from_photo",
    "photo_size",
    "synthetic_photo",
    "write_blobproto",
    "write_bsds500",
    "write_caltech101_silhouettes",
    "write_cifar",
    "write_ilsvrc12",
    "write_jpeg",
    "write_mnist",
    "write_places365",
    "write_svhn",
    "write_tiny_imagenet",
]

#: Grating periods per image side: the pattern survives random crops of a tenth of the image.
_GRATING_CYCLES = 5.0
#: The fine detail of ImageNet-like photos: JPEGs of about ImageNet's average size (~110 KB).
PHOTO_TEXTURE = 22.0
#: Brightness amplitude of the label grating (out of 255).
_GRATING_AMPLITUDE = 28.0


# -- written datasets ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageFiles:
    """A dataset of image files: pass ``root`` (and ``meta_dir``) to the reader.

    ``files[split]`` lists ``(full path, label)`` in the order of the dataset's own list files;
    ``classes[label]`` is the class id (wnid or name); ``mean`` is the per-pixel mean written, if any.
    """

    root: str
    classes: list[str]
    files: dict[str, list[tuple[str, int]]]
    meta_dir: str | None = None
    mean: np.ndarray | None = None


@dataclass(frozen=True)
class ArraySplits:
    """A dataset of arrays: ``images[split]`` and ``labels[split]`` as the reader should yield them."""

    root: str
    images: dict[str, np.ndarray]
    labels: dict[str, np.ndarray]
    label_names: list[str] = field(default_factory=list)


# -- images -------------------------------------------------------------------------------------


def _grating(height: int, width: int, label: int, num_classes: int) -> np.ndarray:
    # Orientations in [0, 90) degrees: a horizontal flip maps them to (90, 180], never to another class.
    theta = np.pi / 2 * label / num_classes
    k = 2 * np.pi * _GRATING_CYCLES / max(height, width)
    u = k * np.cos(theta) * np.arange(width, dtype=np.float32)
    v = k * np.sin(theta) * np.arange(height, dtype=np.float32)
    return np.outer(np.cos(v), np.cos(u)) - np.outer(np.sin(v), np.sin(u))  # cos(u + v), separably


def synthetic_photo(
    rng: np.random.Generator,
    height: int,
    width: int,
    label: int | None = None,
    num_classes: int | None = None,
    texture: float = 0.0,
) -> np.ndarray:
    """A natural-looking BGR uint8 ``(height, width, 3)`` image; with ``label``, it carries the class.

    ``texture`` adds fine detail (normal noise of that standard deviation) so that the JPEG is as
    large as a photo's: about 100 KB at 500x375 with ``texture=22``, as ImageNet's average.

    A smooth colour gradient and a few soft-edged shapes (drawn at a quarter of the size and
    scaled up), mild noise, and with ``label`` (of ``num_classes``, distinguishable up to ~16
    classes) a brightness grating whose orientation is ``90 * label / num_classes`` degrees.
    """
    if label is not None and (num_classes is None or not 0 <= label < num_classes):
        raise ValueError(f"label {label} needs num_classes > label, got num_classes={num_classes}")
    sh, sw = max(8, height // 4), max(8, width // 4)
    corners = rng.integers(30, 226, size=(2, 2, 3)).astype(np.uint8)
    canvas = cv2.resize(corners, (sw, sh), interpolation=cv2.INTER_LINEAR).astype(np.float32)
    scale = max(sh, sw)
    for _ in range(int(rng.integers(2, 5))):
        colour = tuple(float(c) for c in rng.integers(0, 256, size=3))
        cx, cy = int(rng.integers(0, sw)), int(rng.integers(0, sh))
        r = int(rng.integers(max(1, scale // 12), max(2, scale // 4) + 1))
        if rng.random() < 0.5:
            cv2.circle(canvas, (cx, cy), r, colour, -1, cv2.LINE_AA)
        else:
            cv2.rectangle(canvas, (cx - r, cy - r // 2), (cx + r, cy + r // 2), colour, -1, cv2.LINE_AA)
    img = cv2.resize(canvas, (width, height), interpolation=cv2.INTER_LINEAR)
    if label is not None:
        img += (_GRATING_AMPLITUDE * _grating(height, width, label, num_classes))[:, :, None]
    img += rng.integers(-5, 6, size=img.shape, dtype=np.int8)  # uniform, sd ~3; much faster than normal
    if texture:
        img += rng.normal(0, texture, size=img.shape).astype(np.float32)
    return np.clip(img + 0.5, 0, 255).astype(np.uint8)


def label_from_photo(img: np.ndarray, num_classes: int) -> int:
    """The label whose grating matches ``img`` best (an uncropped, unflipped :func:`synthetic_photo`)."""
    gray = img.astype(np.float32) if img.ndim == 2 else img.astype(np.float32).mean(axis=2)
    gray -= gray.mean()
    h, w = gray.shape
    theta = np.pi / 2 * np.arange(num_classes) / num_classes
    period = max(h, w) / _GRATING_CYCLES
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    scores = [
        abs(np.sum(gray * np.exp(-2j * np.pi * (x * np.cos(t) + y * np.sin(t)) / period))) for t in theta
    ]
    return int(np.argmax(scores))


def photo_size(rng: np.random.Generator, imagenet_like: bool = False) -> tuple[int, int]:
    """A random ``(height, width)``: 48-96 px of varying aspect, or ImageNet-like around 500x375."""
    if imagenet_like:
        long, short = int(rng.integers(400, 501)), int(rng.integers(300, 376))
    else:
        long, short = int(rng.integers(64, 97)), int(rng.integers(48, 81))
    return (short, long) if rng.random() < 0.75 else (long, short)


def encode_jpeg(img: np.ndarray, quality: int = 90) -> bytes:
    """The JPEG bytes of a BGR (or gray) uint8 image."""
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise RuntimeError("cv2.imencode failed")
    return buf.tobytes()


def write_jpeg(path: str, img: np.ndarray, quality: int = 90) -> str:
    """Write ``img`` as a JPEG file at ``path`` (directories created); returns ``path``."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(encode_jpeg(img, quality))
    return path


def _photos(
    rng: np.random.Generator, labels: Sequence[int], num_classes: int, size: tuple[int, int] | None, **kw
) -> list[np.ndarray]:
    out = []
    texture = PHOTO_TEXTURE if kw.get("imagenet_like") else 0.0
    for label in labels:
        h, w = size if size is not None else photo_size(rng, **kw)
        out.append(synthetic_photo(rng, h, w, int(label), num_classes, texture))
    return out


def _labels(rng: np.random.Generator, n: int, num_classes: int) -> np.ndarray:
    """``n`` labels covering every class as evenly as possible, in random order."""
    return rng.permutation(np.arange(n) % num_classes)


# -- MNIST --------------------------------------------------------------------------------------


def _write_idx_gz(path: str, magic: int, array: np.ndarray) -> None:
    header = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + np.ascontiguousarray(array, np.uint8).tobytes())


def write_mnist(directory: str, num_train: int = 60, num_test: int = 20, seed: int = 0) -> ArraySplits:
    """The four MNIST (or Fashion-MNIST: the same files) ``*-idx?-ubyte.gz`` files in ``directory``.

    Images are 28x28 gray :func:`synthetic_photo` s; ``images`` are what the reader yields
    (float32 in [0, 1]), ``labels`` uint8.
    """
    rng = np.random.default_rng(seed)
    os.makedirs(directory, exist_ok=True)
    out = ArraySplits(directory, {}, {}, [str(i) for i in range(10)])
    for split, prefix, n in (("train", "train", num_train), ("test", "t10k", num_test)):
        labels = _labels(rng, n, 10).astype(np.uint8)
        photos = _photos(rng, labels, 10, (28, 28))
        images = (
            np.stack([cv2.cvtColor(p, cv2.COLOR_BGR2GRAY) for p in photos]) if n else np.zeros((0, 28, 28))
        )
        _write_idx_gz(os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz"), 2051, images)
        _write_idx_gz(os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz"), 2049, labels)
        out.images[split] = images.astype(np.float32) / 255.0
        out.labels[split] = labels
    return out


# -- CIFAR --------------------------------------------------------------------------------------


class _Py2Pickler(pickle._Pickler):  # type: ignore[name-defined]
    """Pickles bytes as Python 2 ``str`` (as the official CIFAR files were written by Python 2).

    So the files load as the originals do: ``encoding="bytes"`` gives bytes keys, the default
    encoding gives str keys.
    """

    dispatch = dict(pickle._Pickler.dispatch)  # type: ignore[attr-defined]

    def save_py2_str(self, obj: bytes) -> None:
        n = len(obj)
        if n < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([n]) + obj)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", n) + obj)
        self.memoize(obj)

    dispatch[bytes] = save_py2_str


def _py2_pickle(path: str, obj: object) -> None:
    with open(path, "wb") as f:
        _Py2Pickler(f, protocol=2).dump(obj)


def _cifar_rows(images_rgb: np.ndarray) -> np.ndarray:
    """``(N, 3072)`` uint8: the R, G and B planes of each 32x32 image, row-major."""
    return np.ascontiguousarray(images_rgb.transpose(0, 3, 1, 2).reshape(len(images_rgb), 3072))


CIFAR10_LABEL_NAMES = [
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
]


def write_cifar(
    directory: str, classnum: int = 10, per_batch: int = 20, num_test: int | None = None, seed: int = 0
) -> ArraySplits:
    """CIFAR-10 (``cifar-10-batches-py/``) or CIFAR-100 (``cifar-100-python/``) batches in ``directory``.

    CIFAR-10: ``data_batch_1..5`` of ``per_batch`` records, ``test_batch`` and ``batches.meta``;
    CIFAR-100: ``train`` (``5 * per_batch`` records), ``test`` and ``meta``; the official keys.
    ``images`` are RGB uint8 (N, 32, 32, 3) as the reader yields them.
    """
    if classnum not in (10, 100):
        raise ValueError(f"classnum must be 10 or 100, got {classnum}")
    rng = np.random.default_rng(seed)
    num_test = per_batch if num_test is None else num_test
    folder = os.path.join(directory, "cifar-10-batches-py" if classnum == 10 else "cifar-100-python")
    os.makedirs(folder, exist_ok=True)
    names = CIFAR10_LABEL_NAMES if classnum == 10 else [f"class_{i:02d}" for i in range(100)]

    def batch(n: int, title: str) -> tuple[dict[bytes, object], np.ndarray, list[int]]:
        labels = [int(x) for x in _labels(rng, n, classnum)]
        rgb = np.stack([p[:, :, ::-1] for p in _photos(rng, labels, classnum, (32, 32))]) if n else None
        rgb = rgb if rgb is not None else np.zeros((0, 32, 32, 3), np.uint8)
        d: dict[bytes, object] = {
            b"batch_label": title.encode(),
            b"data": _cifar_rows(rgb),
            b"filenames": [f"synthetic_{title.replace(' ', '_')}_{i}.png".encode() for i in range(n)],
        }
        if classnum == 10:
            d[b"labels"] = labels
        else:
            d[b"fine_labels"] = labels
            d[b"coarse_labels"] = [label // 5 for label in labels]
        return d, rgb, labels

    out = ArraySplits(directory, {}, {}, names)
    if classnum == 10:
        train = [batch(per_batch, f"training batch {i} of 5") for i in range(1, 6)]
        for i, (d, _, _) in enumerate(train, 1):
            _py2_pickle(os.path.join(folder, f"data_batch_{i}"), d)
        test = batch(num_test, "testing batch 1 of 1")
        _py2_pickle(os.path.join(folder, "test_batch"), test[0])
        meta = {
            b"num_cases_per_batch": per_batch,
            b"label_names": [n.encode() for n in names],
            b"num_vis": 3072,
        }
        _py2_pickle(os.path.join(folder, "batches.meta"), meta)
    else:
        train = [batch(5 * per_batch, "training batch 1 of 1")]
        _py2_pickle(os.path.join(folder, "train"), train[0][0])
        test = batch(num_test, "testing batch 1 of 1")
        _py2_pickle(os.path.join(folder, "test"), test[0])
        coarse = [f"superclass_{i:02d}".encode() for i in range(20)]
        meta = {b"fine_label_names": [n.encode() for n in names], b"coarse_label_names": coarse}
        _py2_pickle(os.path.join(folder, "meta"), meta)
    out.images["train"] = np.concatenate([t[1] for t in train])
    out.labels["train"] = np.array([label for t in train for label in t[2]], np.int64)
    out.images["test"], out.labels["test"] = test[1], np.array(test[2], np.int64)
    return out


# -- ILSVRC12 -----------------------------------------------------------------------------------

#: The first ten ILSVRC12 synsets; more classes get made-up wnids after them.
_WNIDS = [
    ("n01440764", "tench, Tinca tinca"),
    ("n01443537", "goldfish, Carassius auratus"),
    ("n01484850", "great white shark, white shark, man-eater, man-eating shark, Carcharodon carcharias"),
    ("n01491361", "tiger shark, Galeocerdo cuvieri"),
    ("n01494475", "hammerhead, hammerhead shark"),
    ("n01496331", "electric ray, crampfish, numbfish, torpedo"),
    ("n01498041", "stingray"),
    ("n01514668", "cock"),
    ("n01514859", "hen"),
    ("n01518878", "ostrich, Struthio camelus"),
]


def _synsets(num_classes: int) -> list[tuple[str, str]]:
    extra = [(f"n{2000000 + 7919 * i:08d}", f"synthetic class {i}") for i in range(len(_WNIDS), num_classes)]
    return sorted((_WNIDS + extra)[:num_classes])


def write_blobproto(path: str, blob: np.ndarray) -> None:
    """A caffe ``BlobProto`` file of the float (num, channels, height, width) array ``blob``.

    The fields are written as caffe does: num (1), channels (2), height (3), width (4) as varints
    and data (5) as a packed float array.
    """

    def varint(v: int) -> bytes:
        out = bytearray()
        while True:
            b, v = v & 0x7F, v >> 7
            out.append(b | (0x80 if v else 0))
            if not v:
                return bytes(out)

    blob = np.asarray(blob, np.float32)
    if blob.ndim != 4:
        raise ValueError(f"a BlobProto here is (num, channels, height, width), got shape {blob.shape}")
    dims = zip((1, 2, 3, 4), blob.shape, strict=True)
    msg = b"".join(bytes([field << 3]) + varint(int(d)) for field, d in dims)
    data = blob.astype("<f4").tobytes()
    with open(path, "wb") as f:
        f.write(msg + bytes([(5 << 3) | 2]) + varint(len(data)) + data)


def write_ilsvrc12(
    directory: str,
    meta_dir: str | None = None,
    num_classes: int = 4,
    train_per_class: int = 3,
    num_val: int = 8,
    num_test: int = 4,
    *,
    val_structure: str = "original",
    imagenet_like: bool = False,
    mean_size: tuple[int, int] = (32, 32),
    seed: int = 0,
) -> ImageFiles:
    """An ILSVRC12 image directory and its caffe meta directory.

    ``directory`` gets ``train/<wnid>/<wnid>_<k>.JPEG``, ``val/ILSVRC2012_val_%08d.JPEG`` (or
    ``val/<wnid>/...`` with ``val_structure="train"``) and ``test/ILSVRC2012_test_%08d.JPEG``;
    ``meta_dir`` (default ``directory/meta``) gets synsets.txt (sorted wnids), synset_words.txt,
    train.txt, val.txt, test.txt (test labels 0, as caffe's) and imagenet_mean.binaryproto (a BGR
    mean of ``mean_size``, returned as ``mean``, (h, w, 3) float32).
    """
    rng = np.random.default_rng(seed)
    meta_dir = os.path.join(directory, "meta") if meta_dir is None else meta_dir
    os.makedirs(meta_dir, exist_ok=True)
    synsets = _synsets(num_classes)
    wnids = [w for w, _ in synsets]
    files: dict[str, list[tuple[str, int]]] = {"train": [], "val": [], "test": []}
    lines: dict[str, list[str]] = {"train": [], "val": [], "test": []}
    train_labels = np.repeat(np.arange(num_classes), train_per_class)
    for label, img, k in zip(
        train_labels,
        _photos(rng, train_labels, num_classes, None, imagenet_like=imagenet_like),
        rng.permutation(100000)[: len(train_labels)],
        strict=True,
    ):
        rel = f"{wnids[label]}/{wnids[label]}_{k}.JPEG"
        files["train"].append((write_jpeg(os.path.join(directory, "train", rel), img), int(label)))
        lines["train"].append(f"{rel} {label}")
    for split, n in (("val", num_val), ("test", num_test)):
        labels = _labels(rng, n, num_classes)
        for i, (label, img) in enumerate(
            zip(labels, _photos(rng, labels, num_classes, None, imagenet_like=imagenet_like), strict=True), 1
        ):
            name = f"ILSVRC2012_{split}_{i:08d}.JPEG"
            sub = wnids[label] if split == "val" and val_structure == "train" else ""
            path = write_jpeg(os.path.join(directory, split, sub, name), img)
            written_label = int(label) if split == "val" else 0
            files[split].append((path, written_label))
            lines[split].append(f"{name} {written_label}")
    for split, split_lines in lines.items():
        with open(os.path.join(meta_dir, f"{split}.txt"), "w") as f:
            f.writelines(line + "\n" for line in split_lines)
    with open(os.path.join(meta_dir, "synsets.txt"), "w") as f:
        f.writelines(w + "\n" for w in wnids)
    with open(os.path.join(meta_dir, "synset_words.txt"), "w") as f:
        f.writelines(f"{w} {words}\n" for w, words in synsets)
    mean = cv2.GaussianBlur(synthetic_photo(rng, *mean_size), (0, 0), 2).astype(np.float32)
    write_blobproto(os.path.join(meta_dir, "imagenet_mean.binaryproto"), mean.transpose(2, 0, 1)[None])
    return ImageFiles(directory, wnids, files, meta_dir=meta_dir, mean=mean)


def write_tiny_imagenet(
    directory: str, train_per_class: int = 1, num_val: int = 20, seed: int = 0
) -> ImageFiles:
    """A ``tiny-imagenet-200`` directory (returned as ``root``) of 64x64 JPEGs in ``directory``.

    wnids.txt lists 200 wnids in a shuffled order (the label map, as in the original), with
    train/<wnid>/images/<wnid>_<k>.JPEG, train/<wnid>/<wnid>_boxes.txt, val/images/val_<k>.JPEG,
    val/val_annotations.txt (tab-separated file, wnid, box) and words.txt.
    """
    rng = np.random.default_rng(seed)
    root = os.path.join(directory, "tiny-imagenet-200")
    os.makedirs(os.path.join(root, "val", "images"), exist_ok=True)
    wnids = [w for w, _ in _synsets(200)]
    wnids = [wnids[i] for i in rng.permutation(200)]
    with open(os.path.join(root, "wnids.txt"), "w") as f:
        f.writelines(w + "\n" for w in wnids)
    with open(os.path.join(root, "words.txt"), "w") as f:
        f.writelines(f"{w}\t{words}\n" for w, words in _synsets(200))
    files: dict[str, list[tuple[str, int]]] = {"train": [], "val": []}
    for label, w in enumerate(wnids):
        boxes = []
        for k in range(train_per_class):
            name = f"{w}_{k}.JPEG"
            img = synthetic_photo(rng, 64, 64, label % 16, 16)
            files["train"].append((write_jpeg(os.path.join(root, "train", w, "images", name), img), label))
            boxes.append(f"{name}\t8\t8\t56\t56\n")
        with open(os.path.join(root, "train", w, f"{w}_boxes.txt"), "w") as f:
            f.writelines(boxes)
    annotations = []
    for k, label in enumerate(rng.integers(0, 200, size=num_val)):
        name = f"val_{k}.JPEG"
        img = synthetic_photo(rng, 64, 64, int(label) % 16, 16)
        files["val"].append((write_jpeg(os.path.join(root, "val", "images", name), img), int(label)))
        annotations.append(f"{name}\t{wnids[label]}\t4\t4\t60\t60\n")
    with open(os.path.join(root, "val", "val_annotations.txt"), "w") as f:
        f.writelines(annotations)
    return ImageFiles(root, wnids, files)


# -- Places365 ----------------------------------------------------------------------------------


def write_places365(
    directory: str,
    classes: Sequence[str] = ("airfield", "beach", "canyon"),
    train_per_class: int = 2,
    val_per_class: int = 1,
    seed: int = 0,
) -> ImageFiles:
    """A ``places365_standard`` directory (``root``) in the "easy directory structure", 256x256 JPEGs.

    train.txt / val.txt list ``train/<class>/<k>.jpg`` / ``val/<class>/Places365_val_<k>.jpg``;
    labels follow the sorted class names.
    """
    rng = np.random.default_rng(seed)
    root = os.path.join(directory, "places365_standard")
    names = sorted(classes)
    files: dict[str, list[tuple[str, int]]] = {"train": [], "val": []}
    for split, per_class in (("train", train_per_class), ("val", val_per_class)):
        entries = [(c, k) for c in classes for k in range(per_class)]
        entries = [entries[i] for i in rng.permutation(len(entries))]
        lines = []
        for i, (c, k) in enumerate(entries, 1):
            label = names.index(c)
            fname = f"{k + 1:08d}.jpg" if split == "train" else f"Places365_val_{i:08d}.jpg"
            rel = f"{split}/{c}/{fname}"
            img = synthetic_photo(rng, 256, 256, label % 16, 16)
            files[split].append((write_jpeg(os.path.join(root, rel), img), label))
            lines.append(rel + "\n")
        with open(os.path.join(root, f"{split}.txt"), "w") as f:
            f.writelines(lines)
    return ImageFiles(root, names, files)


# -- .mat datasets (SVHN, BSDS500, Caltech101 silhouettes) --------------------------------------


def write_svhn(directory: str, counts: Mapping[str, int] | None = None, seed: int = 0) -> ArraySplits:
    """SVHN cropped digits ``<split>_32x32.mat`` (``X`` (32, 32, 3, N) uint8 RGB, ``y`` (N, 1), 10 for 0).

    ``counts`` maps split (train/test/extra) to its size (default train 30, test 10).
    """
    import scipy.io

    rng = np.random.default_rng(seed)
    os.makedirs(directory, exist_ok=True)
    out = ArraySplits(directory, {}, {}, [str(i) for i in range(10)])
    for split, n in (counts or {"train": 30, "test": 10}).items():
        labels = _labels(rng, n, 10).astype(np.uint8)
        rgb = np.stack([p[:, :, ::-1] for p in _photos(rng, labels, 10, (32, 32))])
        y = np.where(labels == 0, 10, labels).astype(np.uint8)[:, None]
        scipy.io.savemat(
            os.path.join(directory, f"{split}_32x32.mat"), {"X": rgb.transpose(1, 2, 3, 0), "y": y}
        )
        out.images[split], out.labels[split] = rgb, labels
    return out


def write_bsds500(directory: str, counts: Mapping[str, int] | None = None, seed: int = 0) -> ArraySplits:
    """The ``BSR/BSDS500/data`` tree: images/<split>/<id>.jpg (481x321, some portrait 321x481) and
    groundTruth/<split>/<id>.mat (a 1xK cell of structs with Segmentation and Boundaries).

    ``images``/``labels`` are what the reader yields (portraits transposed), by sorted file name.
    """
    import scipy.io

    rng = np.random.default_rng(seed)
    data = os.path.join(directory, "BSR", "BSDS500", "data")
    out = ArraySplits(directory, {}, {})
    for split, n in (counts or {"train": 3, "val": 2, "test": 2}).items():
        os.makedirs(os.path.join(data, "groundTruth", split), exist_ok=True)
        items = []
        for i in range(n):
            portrait = i % 3 == 1
            h, w = (481, 321) if portrait else (321, 481)
            img = synthetic_photo(rng, h, w)
            path = write_jpeg(os.path.join(data, "images", split, f"{100007 + 1013 * i}.jpg"), img)
            annotators = int(rng.integers(3, 6))
            cell = np.empty((1, annotators), dtype=object)
            gray = cv2.cvtColor(cv2.imread(path), cv2.COLOR_BGR2GRAY)
            maps = []
            for a in range(annotators):
                edges = (cv2.Canny(gray, 20 + 15 * a, 60 + 30 * a) > 0).astype(np.uint8)
                cell[0, a] = {"Segmentation": np.ones((h, w), np.uint16), "Boundaries": edges}
                maps.append(edges.astype(np.float32))
            scipy.io.savemat(
                os.path.join(data, "groundTruth", split, f"{100007 + 1013 * i}.mat"), {"groundTruth": cell}
            )
            decoded = cv2.imread(path)
            label = sum(maps) / np.float32(annotators)
            if portrait:
                decoded, label = decoded.transpose(1, 0, 2), label.T
            items.append((os.path.basename(path), decoded, label))
        items.sort(key=lambda t: t[0])
        out.images[split] = np.stack([t[1] for t in items])
        out.labels[split] = np.stack([t[2] for t in items])
    return out


def write_caltech101_silhouettes(
    directory: str, counts: Mapping[str, int] | None = None, seed: int = 0
) -> ArraySplits:
    """``caltech101_silhouettes_28_split1.mat``: ``<split>_data`` (N, 784) float64 0/1 (C order of
    28x28), ``<split>_labels`` (N, 1) in 1..101 and ``classnames``. ``labels`` are 0..100."""
    import scipy.io

    rng = np.random.default_rng(seed)
    os.makedirs(directory, exist_ok=True)
    out = ArraySplits(directory, {}, {}, [f"class_{i}" for i in range(101)])
    mat: dict[str, object] = {"classnames": np.array(out.label_names, dtype=object)[None]}
    for split, n in (counts or {"train": 12, "test": 5, "val": 4}).items():
        labels = _labels(rng, n, 101)
        images = np.stack(
            [
                (cv2.cvtColor(synthetic_photo(rng, 28, 28), cv2.COLOR_BGR2GRAY) > 127).astype(np.float64)
                for _ in labels
            ]
        )
        mat[f"{split}_data"] = images.reshape(n, 784)
        mat[f"{split}_labels"] = (labels + 1).astype(np.float64)[:, None]
        out.images[split], out.labels[split] = images, labels
    scipy.io.savemat(os.path.join(directory, "caltech101_silhouettes_28_split1.mat"), mat)
    return out
