"""The ``dataflow pack-images`` and ``dataflow read-images`` commands: the image LMDB recipe from a shell."""

from __future__ import annotations

import enum
import os
import time

from ..cli_error import CLIError
from ..dataset.files import DatasetFormatError
from ..pipeline.progress import progress_bar
from .fbresnet import fbresnet_augmentor
from .lmdb_recipe import image_lmdb_dataflow, pack_imagenet

__all__ = ["Augment", "pack_images", "read_images"]


class Augment(enum.Enum):
    """The augmentation ``read-images`` applies."""

    TRAIN = "train"  # fbresnet training augmentation
    VAL = "val"  # shorter side to 256, centre 224x224
    NONE = "none"  # images as decoded (they must all have one shape to be batched)

    @classmethod
    def parse(cls, value: str) -> Augment:
        try:
            return cls(str(value).lower())
        except ValueError:
            raise CLIError(f"--augment must be train, val or none, got {value!r}") from None


def _size_of(path: str) -> int:
    if os.path.isdir(path):
        return sum(e.stat().st_size for e in os.scandir(path) if e.is_file())
    return os.path.getsize(path)


def pack_images(
    data_dir: str, out: str, split: str = "train", meta_dir: str | None = None, seed: int = 0
) -> None:
    """Pack an ImageNet-layout directory into an image LMDB (encoded bytes + label per record).

    Args:
        data_dir: the directory holding train/, val/ and test/.
        out: the LMDB file to create (it must not exist).
        split: train, val or test.
        meta_dir: the ILSVRC metadata directory (synsets.txt, train.txt, ...); default
            $TENSORPACK_DATASET/ilsvrc_metadata.
        seed: the seed of the stored (shuffled) order.
    """
    out = os.fspath(out)
    if os.path.exists(out):
        raise CLIError(f"{out} already exists; write to a new path")
    start = time.perf_counter()
    try:
        count = pack_imagenet(data_dir, split, out, meta_dir=meta_dir, seed=int(seed))
    except (FileNotFoundError, DatasetFormatError, ValueError) as e:
        raise CLIError(str(e)) from None
    seconds = time.perf_counter() - start
    print(f"packed {count} records, {_size_of(out)} bytes, in {seconds:.1f} s to {out}", flush=True)


def read_images(
    lmdb: str, workers: int = 2, batch: int = 64, augment: str = "train", epochs: int = 1
) -> None:
    """Read an image LMDB back as augmented batches and print images/s.

    Args:
        lmdb: the LMDB file written by pack-images.
        workers: worker processes that decode and augment.
        batch: images per batch.
        augment: train (fbresnet training augmentation), val (resize and centre crop) or none.
        epochs: epochs to read.
    """
    mode = Augment.parse(augment)
    if not os.path.exists(lmdb):
        raise CLIError(f"{lmdb} does not exist")
    if int(workers) < 0 or int(batch) < 1 or int(epochs) < 1:
        raise CLIError(
            f"need --workers >= 0, --batch >= 1 and --epochs >= 1, got {workers}, {batch}, {epochs}"
        )
    augmentors = [] if mode is Augment.NONE else fbresnet_augmentor(mode is Augment.TRAIN)
    df = image_lmdb_dataflow(lmdb, augmentors, int(batch), int(workers), remainder=True)
    total = 0
    start = time.perf_counter()
    with df:
        df.reset_state()
        try:
            for epoch in range(1, int(epochs) + 1):
                t0, images = time.perf_counter(), 0
                # the epoch's line below replaces the bar; in a log the bar is a line per interval
                with progress_bar(unit="img", label=f"epoch {epoch}", leave=False, dynamic_ncols=True) as bar:
                    for images_batch, _labels in df:
                        images += len(images_batch)
                        bar.update(len(images_batch))
                seconds = time.perf_counter() - t0
                print(
                    f"epoch {epoch}: {images} images in {seconds:.2f} s: {images / seconds:.1f} images/s",
                    flush=True,
                )
                total += images
        except ValueError as e:  # a record that does not decode, or images of several sizes
            hint = (
                " (--augment none keeps the decoded sizes, which must be equal)"
                if mode is Augment.NONE
                else ""
            )
            raise CLIError(f"{lmdb}: {e}{hint}") from None
    seconds = time.perf_counter() - start
    print(f"read {total} images in {seconds:.2f} s: {total / seconds:.1f} images/s")
