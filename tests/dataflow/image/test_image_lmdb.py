"""The image LMDB recipe: pack an ImageNet-layout tree, read it back in worker processes, and the CLI."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
import pytest

from support.image_datasets import write_ilsvrc12
from support.procs import run_python
from towerpack.dataflow import DataFlowWorkerError, DataFromList, LMDBSerializer
from towerpack.dataflow.image.decode import ImageDecodeError
from towerpack.dataflow.image.fbresnet import fbresnet_augmentor
from towerpack.dataflow.image.lmdb_recipe import image_lmdb_dataflow, pack_image_lmdb, pack_imagenet
from towerpack.dataflow.imgaug.base import AugmentorList
from towerpack.dataflow.imgaug.misc import Resize
from towerpack.dataflow.parallel.process import START_METHOD_VAR
from towerpack.dataflow.resume.keys import as_keys, split_keys
from towerpack.dataflow.resume.ledger import Ledger
from towerpack.dataflow.resume.position import DataPosition
from towerpack.dataflow.resume.tracker import PositionMode, PositionTracker

CLASSES = 4
PER_CLASS = 6
N = CLASSES * PER_CLASS
H, W = 40, 48
#: Makes the synthetic photos (of varying sizes) one shape, so that they can be batched.
RESIZE = [Resize((H, W))]


@dataclass
class Photos:
    """The training split of a tiny ImageNet tree, and how to tell its images apart once read."""

    data: Path
    meta: Path
    files: list[tuple[str, int]]  # (path, label) of image i
    by_bytes: dict[bytes, int] = field(default_factory=dict)  # file bytes -> i
    by_pixels: dict[bytes, int] = field(default_factory=dict)  # BGR pixels after RESIZE or val aug -> i

    def image_id(self, img: np.ndarray, rgb: bool = False) -> int:
        return self.by_pixels[np.ascontiguousarray(img[..., ::-1] if rgb else img).tobytes()]

    def label(self, i: int) -> int:
        return self.files[i][1]


@pytest.fixture(scope="module")
def imagenet(tmp_path_factory):
    root = tmp_path_factory.mktemp("imagenet")
    written = write_ilsvrc12(str(root / "data"), str(root / "meta"), CLASSES, PER_CLASS)
    photos = Photos(root / "data", root / "meta", written.files["train"])
    val = AugmentorList(fbresnet_augmentor(False))
    for i, (path, _) in enumerate(photos.files):
        data = Path(path).read_bytes()
        photos.by_bytes[data] = i
        img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        photos.by_pixels[cv2.resize(img, (W, H)).tobytes()] = i
        photos.by_pixels[val.augment(img).tobytes()] = i
    assert len(photos.by_bytes) == N and len(photos.by_pixels) == 2 * N
    return photos


@pytest.fixture(scope="module")
def packed(imagenet, tmp_path_factory):
    out = tmp_path_factory.mktemp("packed") / "train.lmdb"
    assert pack_imagenet(imagenet.data, "train", out, meta_dir=imagenet.meta, seed=0, progress=False) == N
    return out


def _stored_ids(photos: Photos, path) -> list[int]:
    """The image index of every record of an image LMDB, in storage order; checks bytes and labels."""
    df = LMDBSerializer.load(path, shuffle=False, shard=False)
    df.reset_state()
    ids = []
    for data, label in df:
        assert data.dtype == np.uint8 and data.ndim == 1
        i = photos.by_bytes[data.tobytes()]  # the file's bytes, unchanged
        assert label == photos.label(i)
        ids.append(i)
    return ids


def test_pack_imagenet_stores_file_bytes_in_a_seeded_shuffled_order(imagenet, packed, tmp_path):
    ids = _stored_ids(imagenet, packed)
    assert sorted(ids) == list(range(N))
    assert ids != sorted(ids)  # shuffled, so that reading blocks mixes classes
    for name, seed in [("again", 0), ("other", 1)]:
        pack_imagenet(
            imagenet.data, "train", tmp_path / name, meta_dir=imagenet.meta, seed=seed, progress=False
        )
    assert _stored_ids(imagenet, tmp_path / "again") == ids
    assert _stored_ids(imagenet, tmp_path / "other") != ids


def _epochs(df, epochs: int) -> list[list]:
    """The batches of ``epochs`` epochs of ``df`` (reset here, closed after)."""
    with df:
        df.reset_state()
        return [list(df) for _ in range(epochs)]


@pytest.mark.timeout(60)
def test_two_workers_read_every_record_once_per_epoch(imagenet, packed):
    df = image_lmdb_dataflow(packed, RESIZE, 5, 2, remainder=True, block_size=4, shuffle_buffer=3)
    assert len(df) == 5
    orders = []
    for batches in _epochs(df, 3):
        assert [len(b[0]) for b in batches] == [5, 5, 5, 5, 4]
        ids = []
        for images, labels in batches:
            assert images.dtype == np.uint8 and images.shape[1:] == (H, W, 3)
            assert labels.dtype == np.int32 and labels.shape == (len(images),)
            batch_ids = [imagenet.image_id(img) for img in images]
            assert list(labels) == [imagenet.label(i) for i in batch_ids]
            ids += batch_ids
        assert sorted(ids) == list(range(N))
        orders.append(ids)
    assert len({tuple(o) for o in orders}) > 1  # a new order every epoch


@pytest.mark.timeout(60)
def test_full_batches_only_without_remainder(imagenet, packed):
    df = image_lmdb_dataflow(packed, RESIZE, 5, 2, block_size=4)
    assert len(df) == 4
    (batches,) = _epochs(df, 1)
    assert [len(b[0]) for b in batches] == [5] * 4
    assert len({imagenet.image_id(img) for b in batches for img in b[0]}) == 20


@pytest.mark.timeout(60)
def test_two_ranks_of_two_workers_split_each_epoch(imagenet, packed):
    seen = []
    for rank in range(2):
        df = image_lmdb_dataflow(packed, RESIZE, 4, 2, remainder=True, rank=rank, world_size=2, block_size=4)
        assert len(df) == 3  # 12 records per rank
        for batches in _epochs(df, 2):
            seen.append(Counter(imagenet.image_id(img) for images, _ in batches for img in images))
    for epoch in range(2):
        rank0, rank1 = seen[epoch], seen[2 + epoch]
        assert sum(rank0.values()) == sum(rank1.values()) == N // 2
        assert max((rank0 + rank1).values()) == 1
        assert sorted(rank0 + rank1) == list(range(N))


def _tracked_run(photos: Photos, df, position: DataPosition | None, count: int):
    """Read ``count`` batches of ``df`` with exact-position tags from ``position``: ``(data epoch, image
    id)`` of every image read (the epoch from its tag), and the position after them."""
    tracker = PositionTracker.of(df)
    tracker.start(position, PositionMode.TAGS)
    read = []
    with df:
        df.reset_state()
        for images, _ in itertools.islice(tracker.iterate(), count):
            epochs, _ = split_keys(as_keys(df.position_tag))
            assert len(epochs) == len(images)  # one key per image: nothing dropped
            read += [(e, photos.image_id(img)) for e, img in zip(epochs.tolist(), images, strict=True)]
        ledger = Ledger(position, tracker.size)
        ledger.add(tracker.trained_keys(count))
    return read, ledger.position()


@pytest.mark.timeout(90)
@pytest.mark.multiprocess
def test_an_epoch_stopped_with_two_workers_resumes_with_three_each_image_once(imagenet, packed):
    # docs/images.md's pipeline: the reader's shuffle buffer, worker processes that decode and augment
    # (delivering in completion order), batches made in this process. Stopped after 3 batches of 4 in
    # the first data epoch, resumed with 3 workers and batches of 5.
    opts = dict(remainder=True, block_size=4, shuffle_buffer=3, rank=0, world_size=1)
    first, position = _tracked_run(imagenet, image_lmdb_dataflow(packed, RESIZE, 4, 2, **opts), None, 3)
    assert {e for e, _ in first} == {1} and position.epoch == 1 and position.count == 12
    rest, position = _tracked_run(imagenet, image_lmdb_dataflow(packed, RESIZE, 5, 3, **opts), position, 8)
    by_epoch = {e: sorted(i for f, i in first + rest if f == e) for e in (1, 2)}
    # Batches 5, 5, 2 of what was left of epoch 1 (every image once across the stop), 5 of epoch 2.
    assert by_epoch == {1: list(range(N)), 2: list(range(N))}
    assert position == DataPosition(3, N)


@pytest.mark.timeout(60)
def test_augmented_rgb_batches(imagenet, packed):
    df = image_lmdb_dataflow(packed, fbresnet_augmentor(False), 8, 1, shuffle=False, color="RGB")
    (batches,) = _epochs(df, 1)
    assert [b[0].shape for b in batches] == [(8, 224, 224, 3)] * 3
    ids = [imagenet.image_id(img, rgb=True) for images, _ in batches for img in images]
    assert ids == _stored_ids(imagenet, packed)  # storage order without shuffle
    (train,) = _epochs(image_lmdb_dataflow(packed, fbresnet_augmentor(True), 12, 2), 1)
    assert [(b[0].shape, b[0].dtype) for b in train] == [((12, 224, 224, 3), np.uint8)] * 2


@pytest.mark.timeout(90)
def test_spawned_workers(imagenet, packed):
    # With TensorFlow imported, workers are spawned: the whole pipeline must pickle. A fresh
    # interpreter, since spawning leaves multiprocessing's resource tracker running.
    code = textwrap.dedent(
        """
        import sys
        from towerpack.dataflow.image.fbresnet import fbresnet_augmentor
        from towerpack.dataflow.image.lmdb_recipe import image_lmdb_dataflow
        if __name__ == "__main__":
            df = image_lmdb_dataflow(sys.argv[1], fbresnet_augmentor(True), 8, 2, remainder=True)
            with df:
                df.reset_state()
                for images, labels in df:
                    print(images.shape, images.dtype, *labels)
        """
    )
    lines = run_python(code, str(packed), timeout=80, env={START_METHOD_VAR: "spawn"}).stdout.splitlines()
    assert len(lines) == 3
    assert all(line.startswith("(8, 224, 224, 3) uint8 ") for line in lines)
    labels = sorted(int(v) for line in lines for v in line.split()[5:])
    assert labels == sorted(label for _, label in imagenet.files)


@pytest.mark.timeout(60)
def test_corrupt_record_is_an_error_naming_it(tmp_path, imagenet):
    good, _ = imagenet.files[0]
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(Path(good).read_bytes()[:200])
    out = tmp_path / "bad.lmdb"
    assert pack_image_lmdb(DataFromList([[good, 0], [str(cut), 1]], shuffle=False), out, progress=False) == 2
    with pytest.raises(ImageDecodeError, match=r"bad\.lmdb record 00000001"):
        _epochs(image_lmdb_dataflow(out, [], 2, 0, shuffle=False), 1)
    with pytest.raises(DataFlowWorkerError, match=r"bad\.lmdb record 00000001"):
        _epochs(image_lmdb_dataflow(out, [], 2, 1, shuffle=False), 1)


def test_pack_image_lmdb_bad_input(tmp_path, imagenet):
    img, _ = imagenet.files[0]

    def pack(path, label, out):
        return pack_image_lmdb(DataFromList([[str(path), label]]), tmp_path / out, progress=False)

    with pytest.raises(FileNotFoundError, match=r"missing\.jpg"):
        pack(tmp_path / "missing.jpg", 0, "1.lmdb")
    with pytest.raises(ValueError, match="label 'cat' is not an integer"):
        pack(img, "cat", "2.lmdb")
    (tmp_path / "empty.jpg").write_bytes(b"")
    with pytest.raises(ImageDecodeError, match=r"empty\.jpg is empty"):
        pack(tmp_path / "empty.jpg", 0, "3.lmdb")
    with pytest.raises(FileExistsError):
        pack(img, 0, "empty.jpg")


def _dataflow_command() -> list[str]:
    script = Path(sys.executable).parent / "dataflow"
    return [str(script)] if script.exists() else [sys.executable, "-m", "towerpack.dataflow.cli"]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*_dataflow_command(), *args], capture_output=True, text=True, timeout=90, env=dict(os.environ)
    )


@pytest.mark.timeout(180)
def test_cli_pack_and_read(imagenet, tmp_path):
    data, meta, out = str(imagenet.data), str(imagenet.meta), tmp_path / "cli.lmdb"
    packed = _run("pack-images", data, str(out), "--split", "train", "--meta-dir", meta, "--seed", "3")
    assert packed.returncode == 0, packed.stderr
    assert f"packed {N} records, {out.stat().st_size} bytes, in " in packed.stdout
    assert sorted(_stored_ids(imagenet, out)) == list(range(N))

    read = _run(
        "read-images", str(out), "--workers", "2", "--batch", "8", "--augment", "val", "--epochs", "2"
    )
    assert read.returncode == 0, read.stderr
    assert f"epoch 1: {N} images in" in read.stdout and f"epoch 2: {N} images in" in read.stdout
    assert f"read {2 * N} images in" in read.stdout and "images/s" in read.stdout
    train = _run("read-images", str(out), "--batch", "16", "--augment", "train")
    assert train.returncode == 0, train.stderr
    assert f"epoch 1: {N} images in" in train.stdout

    again = _run("pack-images", data, str(out), "--meta-dir", meta)
    assert again.returncode == 2 and "already exists" in again.stderr
    bad = _run("read-images", str(out), "--augment", "strong")
    assert bad.returncode == 2 and "--augment must be train, val or none" in bad.stderr
    ragged = _run("read-images", str(out), "--augment", "none", "--workers", "1")
    assert ragged.returncode == 2 and "cannot stack" in ragged.stderr and "--augment none" in ragged.stderr
    missing = _run("pack-images", str(tmp_path / "nowhere"), str(tmp_path / "x.lmdb"), "--meta-dir", meta)
    assert missing.returncode == 2 and "nowhere" in missing.stderr
