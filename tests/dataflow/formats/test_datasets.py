"""The dataset readers against small datasets in the original formats (written by support.image_datasets)."""

from __future__ import annotations

import collections
import gzip
import itertools
import os
import pickle
import shutil
import subprocess
import sys
import time

import cv2
import numpy as np
import pytest

from support.image_datasets import (
    label_from_photo,
    write_blobproto,
    write_bsds500,
    write_caltech101_silhouettes,
    write_cifar,
    write_ilsvrc12,
    write_jpeg,
    write_mnist,
    write_places365,
    write_svhn,
    write_tiny_imagenet,
)
from towerpack.dataflow import ShardData
from towerpack.dataflow.dataset import (
    BSDS500,
    ILSVRC12,
    Caltech101Silhouettes,
    Cifar10,
    Cifar100,
    DatasetFormatError,
    DatasetNotFoundError,
    FashionMnist,
    ILSVRC12Files,
    ILSVRCMeta,
    IndexedDataset,
    Mnist,
    Places365Standard,
    SVHNDigit,
    TinyImageNet,
)
from towerpack.dataflow.dataset.blobproto import read_blobproto
from towerpack.dataflow.pipeline import sharding


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """One copy of every dataset, shared by the tests that only read it."""
    root = tmp_path_factory.mktemp("datasets")
    return {
        "root": root,
        "mnist": write_mnist(str(root / "mnist_data"), num_train=50, num_test=13),
        "cifar10": write_cifar(str(root / "cifar10_data"), per_batch=20, num_test=7),
        "ilsvrc": write_ilsvrc12(
            str(root / "ilsvrc"), num_classes=4, train_per_class=3, num_val=9, num_test=3
        ),
    }


def _all(ds):
    return list(ds)


# -- formats and values -------------------------------------------------------------------------


def test_mnist_yields_float_images_and_uint8_labels(data):
    written = data["mnist"]
    for split, n in (("train", 50), ("test", 13)):
        ds = Mnist(split, shuffle=False, dir=written.root, shard=False)
        got = _all(ds)
        assert len(ds) == len(got) == n
        images = np.stack([img for img, _ in got])
        assert images.dtype == np.float32 and images.shape == (n, 28, 28)
        np.testing.assert_array_equal(images, written.images[split])
        assert images.min() >= 0.0 and images.max() <= 1.0
        assert all(type(label) is np.uint8 for _, label in got)
        assert [int(label) for _, label in got] == written.labels[split].tolist()
    assert Mnist("train", dir=written.root).get_label_names() == [str(i) for i in range(10)]


def test_fashion_mnist_reads_the_same_format_with_its_label_names(tmp_path):
    written = write_mnist(str(tmp_path), num_train=5, num_test=3, seed=4)
    ds = FashionMnist("test", shuffle=False, dir=str(tmp_path))
    assert [int(y) for _, y in ds] == written.labels["test"].tolist()
    names = ds.get_label_names()
    assert len(names) == 10 and names[0] == "T-shirt/top" and names[9] == "Ankle boot"


class _SameDigitPairs(Mnist):
    """A subclass in the reference's style: endless pairs of images of one digit, drawn with self.rng."""

    def __iter__(self):
        while True:
            label = self.rng.randint(10)
            (same,) = np.nonzero(self.labels == label)
            if len(same):
                i, j = self.rng.choice(same, size=2)
                yield [self.images[i], self.images[j], label]


def test_reader_subclasses_draw_from_their_own_rng_after_reset_state(data):
    written = data["mnist"]
    label_of = {
        img.tobytes(): y for img, y in zip(written.images["train"], written.labels["train"], strict=True)
    }
    ds = _SameDigitPairs("train", dir=written.root)
    streams = []
    for _ in range(2):
        ds.reset_state()
        pairs = list(itertools.islice(ds, 20))
        assert all(label_of[a.tobytes()] == label_of[b.tobytes()] == y for a, b, y in pairs)
        streams.append([int(y) for *_, y in pairs])
    assert streams[0] != streams[1]  # seeded anew by each reset_state, as an RNGDataFlow's


def _rewrite_gz(path, payload):
    with gzip.open(path, "wb") as f:
        f.write(payload)


def test_mnist_rejects_truncated_and_wrong_idx_files(tmp_path):
    write_mnist(str(tmp_path), num_train=6, num_test=2)
    images = str(tmp_path / "train-images-idx3-ubyte.gz")
    labels = str(tmp_path / "train-labels-idx1-ubyte.gz")
    with open(images, "rb") as f:
        good = f.read()

    with open(images, "wb") as f:  # a download cut short: the gzip stream ends early
        f.write(good[: len(good) // 2])
    with pytest.raises(DatasetFormatError, match="not a complete gzip file") as e:
        Mnist("train", dir=str(tmp_path))
    assert images in str(e.value)

    shutil.copy(labels, images)  # the labels file under the images' name
    with pytest.raises(DatasetFormatError, match="magic number is 2049, expected 2051") as e:
        Mnist("train", dir=str(tmp_path))
    assert images in str(e.value)

    raw = gzip.decompress(good)
    _rewrite_gz(images, raw[:-28])  # one image short of what the header says
    with pytest.raises(
        DatasetFormatError, match=r"header says 6x28x28 = 4704 bytes of data, the file holds 4676"
    ):
        Mnist("train", dir=str(tmp_path))

    _rewrite_gz(images, raw[:4] + (5).to_bytes(4, "big") + raw[8:-784])  # 5 images for 6 labels
    with pytest.raises(DatasetFormatError, match=r"holds 5 images but .* holds 6 labels"):
        Mnist("train", dir=str(tmp_path))


def test_cifar10_yields_rgb_images_from_the_python_batches(data):
    written = data["cifar10"]
    ds = Cifar10("train", dir=written.root, shuffle=False)
    got = _all(ds)
    assert len(ds) == len(got) == 100
    images = np.stack([img for img, _ in got])
    assert images.dtype == np.uint8 and images.shape == (100, 32, 32, 3)
    np.testing.assert_array_equal(images, written.images["train"])
    assert [label for _, label in got] == written.labels["train"].tolist()
    assert all(type(label) is int for _, label in got)
    assert len(Cifar10("test", dir=written.root)) == 7
    assert Cifar10("test", dir=written.root).get_label_names()[:2] == ["airplane", "automobile"]


def test_cifar_colour_order_is_rgb(tmp_path):
    write_cifar(str(tmp_path), per_batch=1, num_test=1)
    row = np.zeros((1, 3072), np.uint8)
    row[0, :1024] = 200  # the R plane
    row[0, 2048:] = 50  # the B plane
    batch = {b"batch_label": b"testing batch 1 of 1", b"labels": [3], b"data": row, b"filenames": [b"x.png"]}
    with open(tmp_path / "cifar-10-batches-py" / "test_batch", "wb") as f:
        pickle.dump(batch, f, protocol=2)
    img, label = next(iter(Cifar10("test", dir=str(tmp_path))))
    assert label == 3 and img[..., 0].min() == 200 and img[..., 1].max() == 0 and img[..., 2].min() == 50


def test_cifar_means_use_the_training_split_by_default(data):
    written = data["cifar10"]
    ds = Cifar10("test", dir=written.root)
    mean = ds.get_per_pixel_mean()
    assert mean.dtype == np.float32 and mean.shape == (32, 32, 3)
    np.testing.assert_allclose(mean, written.images["train"].mean(axis=0), rtol=1e-6)
    both = np.concatenate([written.images["train"], written.images["test"]]).mean(axis=0)
    np.testing.assert_allclose(ds.get_per_pixel_mean(("train", "test")), both, rtol=1e-6)
    np.testing.assert_allclose(
        ds.get_per_channel_mean(), written.images["train"].mean(axis=(0, 1, 2)), rtol=1e-5
    )


def test_cifar100_reads_fine_labels_even_under_a_path_containing_train(tmp_path):
    root = tmp_path / "my_train_data"  # the reference took every file under such a path for a train file
    written = write_cifar(str(root), classnum=100, per_batch=4, num_test=6)
    test = Cifar100("test", dir=str(root))
    assert len(test) == 6 and [y for _, y in test] == written.labels["test"].tolist()
    train = Cifar100("train", dir=str(root), shuffle=False)
    assert len(train) == 20 and [y for _, y in train] == written.labels["train"].tolist()
    assert test.get_label_names()[:2] == ["class_00", "class_01"] and len(test.get_label_names()) == 100


def test_cifar_rejects_a_file_that_is_not_a_batch(tmp_path):
    write_cifar(str(tmp_path), per_batch=1, num_test=1)
    path = tmp_path / "cifar-10-batches-py" / "test_batch"
    path.write_bytes(b"<html>404 Not Found</html>")
    with pytest.raises(DatasetFormatError, match="not a CIFAR python pickle") as e:
        Cifar10("test", dir=str(tmp_path))
    assert str(path) in str(e.value)


def test_ilsvrc12_files_and_images_match_the_meta_lists(data):
    written = data["ilsvrc"]
    meta = ILSVRCMeta(written.meta_dir)
    assert meta.get_synset_1000() == dict(enumerate(sorted(written.classes)))
    assert meta.get_synset_words_1000()[0].startswith(written.classes[0] + " ")
    for split in ("train", "val", "test"):
        files = ILSVRC12Files(written.root, split, meta_dir=written.meta_dir, shuffle=False)
        assert [(p, y) for p, y in files] == written.files[split]
    ds = ILSVRC12(written.root, "val", meta_dir=written.meta_dir, shuffle=False)
    assert ds.dir_structure == "original"
    for (img, label), (path, want) in zip(ds, written.files["val"], strict=True):
        assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
        np.testing.assert_array_equal(img, cv2.imread(path, cv2.IMREAD_COLOR))  # BGR, as cv2 reads it
        assert label == want
    train = ILSVRC12Files(written.root, "train", meta_dir=written.meta_dir, shuffle=False)
    assert all(os.path.basename(os.path.dirname(p)) == written.classes[y] for p, y in train)


def test_synthetic_photos_carry_their_label(data):
    written = data["ilsvrc"]
    for path, label in written.files["train"] + written.files["val"]:
        assert label_from_photo(cv2.imread(path), len(written.classes)) == label


def test_ilsvrc12_val_in_train_structure_is_guessed_from_all_entries(tmp_path):
    written = write_ilsvrc12(
        str(tmp_path), num_classes=3, train_per_class=1, num_val=6, val_structure="train"
    )
    (tmp_path / "val" / "0_README.txt").write_text("a stray file, listed before the wnid directories\n")
    assert ILSVRCMeta.guess_dir_structure(str(tmp_path / "val")) == "train"
    ds = ILSVRC12Files(str(tmp_path), "val", meta_dir=written.meta_dir, shuffle=False)
    assert ds.dir_structure == "train" and list(map(tuple, ds)) == written.files["val"]
    (tmp_path / "val" / "ILSVRC2012_val_00000099.JPEG").write_bytes(b"")
    with pytest.raises(ValueError, match=r"both n\* subdirectories and image files; pass dir_structure="):
        ILSVRC12Files(str(tmp_path), "val", meta_dir=written.meta_dir)


def test_ilsvrc12_names_a_corrupt_image(tmp_path):
    written = write_ilsvrc12(str(tmp_path), num_classes=2, train_per_class=1, num_val=3, num_test=1)
    bad = written.files["val"][1][0]
    with open(bad, "r+b") as f:
        f.truncate(40)
    ds = ILSVRC12(str(tmp_path), "val", meta_dir=written.meta_dir, shuffle=False)
    it = iter(ds)
    next(it)
    with pytest.raises(ValueError, match="cannot decode") as e:
        next(it)
    assert bad in str(e.value)


def test_ilsvrc_per_pixel_mean_parses_the_binaryproto(data):
    written = data["ilsvrc"]
    meta = ILSVRCMeta(written.meta_dir)
    mean = meta.get_per_pixel_mean()
    assert mean.dtype == np.float32 and mean.shape == (32, 32, 3)
    np.testing.assert_array_equal(mean, written.mean)
    small = meta.get_per_pixel_mean((16, 24))
    assert small.shape == (16, 24, 3)
    np.testing.assert_allclose(small, cv2.resize(written.mean, (24, 16)), rtol=1e-6)


def _protobuf_blob_class():
    """BlobProto as caffe.proto declares it, built with the protobuf library (an independent encoder)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto(name="blob_test.proto", package="caffe_test", syntax="proto2")
    shape = fdp.message_type.add(name="BlobShape")
    shape.field.add(name="dim", number=1, type=3, label=3).options.packed = True
    blob = fdp.message_type.add(name="BlobProto")
    for name, number in (("num", 1), ("channels", 2), ("height", 3), ("width", 4)):
        blob.field.add(name=name, number=number, type=5, label=1)
    blob.field.add(name="data", number=5, type=2, label=3).options.packed = True
    blob.field.add(name="diff", number=6, type=2, label=3).options.packed = True
    blob.field.add(name="shape", number=7, type=11, label=1, type_name=".caffe_test.BlobShape")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("caffe_test.BlobProto"))


def test_blobproto_reader_agrees_with_protobuf(tmp_path):
    blob_cls = _protobuf_blob_class()
    values = np.arange(24, dtype=np.float32) * 1.5 - 7
    msg = blob_cls(num=1, channels=2, height=3, width=4)
    msg.data.extend(values.tolist())
    msg.diff.extend([9.0] * 24)
    (tmp_path / "a.binaryproto").write_bytes(msg.SerializeToString())
    np.testing.assert_array_equal(read_blobproto(str(tmp_path / "a.binaryproto")), values.reshape(1, 2, 3, 4))
    shaped = blob_cls()
    shaped.shape.dim.extend([2, 12])
    shaped.data.extend(values.tolist())
    (tmp_path / "b.binaryproto").write_bytes(shaped.SerializeToString())
    np.testing.assert_array_equal(read_blobproto(str(tmp_path / "b.binaryproto")), values.reshape(2, 12))
    write_blobproto(str(tmp_path / "c.binaryproto"), values.reshape(1, 2, 3, 4))
    parsed = blob_cls.FromString((tmp_path / "c.binaryproto").read_bytes())
    assert (parsed.num, parsed.channels, parsed.height, parsed.width) == (1, 2, 3, 4)
    np.testing.assert_array_equal(np.array(parsed.data, np.float32), values)
    (tmp_path / "d.binaryproto").write_bytes(msg.SerializeToString()[:-5])
    with pytest.raises(DatasetFormatError, match="runs past the end of the file"):
        read_blobproto(str(tmp_path / "d.binaryproto"))


def test_get_training_bbox_reads_voc_boxes(data, tmp_path):
    imglist = [(rel, 0) for rel in ("n01/n01_1.JPEG", "n01/n01_2.JPEG")]
    os.makedirs(tmp_path / "n01")
    (tmp_path / "n01" / "n01_1.xml").write_text(
        "<annotation><size><width>500</width><height>375</height></size><object><name>n01</name>"
        "<bndbox><xmin>10</xmin><ymin>20</ymin><xmax>300</xmax><ymax>200</ymax></bndbox></object></annotation>"
    )
    boxes = ILSVRC12.get_training_bbox(str(tmp_path), imglist)
    assert boxes[1] is None
    assert boxes[0].dtype == np.float32 and boxes[0].tolist() == [10, 20, 300, 200]


def test_tiny_imagenet_labels_follow_wnids_txt(tmp_path):
    written = write_tiny_imagenet(str(tmp_path), train_per_class=1, num_val=10)
    train = TinyImageNet(written.root, "train", shuffle=False)
    assert len(train) == 200 and train.get_label_names() == written.classes != sorted(written.classes)
    got = list(train)
    assert [y for _, y in got] == [y for _, y in written.files["train"]]
    img, _ = got[5]
    assert img.shape == (64, 64, 3) and img.dtype == np.uint8
    np.testing.assert_array_equal(img, cv2.imread(written.files["train"][5][0]))
    val = TinyImageNet(written.root, "val")
    assert not val.shuffle and [y for _, y in val] == [y for _, y in written.files["val"]]
    with open(os.path.join(written.root, "wnids.txt"), "a") as f:
        f.write("n99999999\n")
    with pytest.raises(DatasetFormatError, match="expected 200 distinct wnids, got 201"):
        TinyImageNet(written.root, "val")


def test_places365_labels_are_sorted_class_names(tmp_path):
    written = write_places365(str(tmp_path), classes=("canyon", "airfield", "beach"), train_per_class=2)
    ds = Places365Standard(written.root, "train", shuffle=False)
    assert ds.get_label_names() == ["airfield", "beach", "canyon"]
    got = list(ds)
    assert [y for _, y in got] == [y for _, y in written.files["train"]] and len(got) == 6
    assert got[0][0].shape == (256, 256, 3)
    np.testing.assert_array_equal(got[0][0], cv2.imread(written.files["train"][0][0]))
    assert len(Places365Standard(written.root, "val")) == 3


def test_svhn_reads_mat_files_and_its_cache_follows_the_directory(tmp_path):
    a = write_svhn(str(tmp_path / "a"), {"train": 12, "test": 4}, seed=1)
    b = write_svhn(str(tmp_path / "b"), {"train": 7}, seed=2)
    ds = SVHNDigit("train", str(tmp_path / "a"), shuffle=False)
    got = list(ds)
    images = np.stack([x for x, _ in got])
    assert images.dtype == np.uint8 and images.shape == (12, 32, 32, 3)
    np.testing.assert_array_equal(images, a.images["train"])
    assert all(type(y) is np.uint8 for _, y in got) and [int(y) for _, y in got] == a.labels["train"].tolist()
    assert 0 in a.labels["train"]  # stored as 10 in the file
    other = SVHNDigit("train", str(tmp_path / "b"), shuffle=False)
    assert len(other) == 7 and [int(y) for _, y in other] == b.labels["train"].tolist()
    with pytest.raises(ValueError, match="'train', 'test', 'extra'"):
        SVHNDigit("validation", str(tmp_path / "a"))
    mean = SVHNDigit.get_per_pixel_mean(data_dir=str(tmp_path / "a"))
    np.testing.assert_allclose(mean, a.images["train"].mean(axis=0))


def test_bsds500_images_and_boundary_labels(tmp_path):
    written = write_bsds500(str(tmp_path), {"val": 3})
    ds = BSDS500("val", str(tmp_path), shuffle=False)
    got = list(ds)
    assert len(ds) == 3
    for (img, label), want_img, want_label in zip(
        got, written.images["val"], written.labels["val"], strict=True
    ):
        assert img.shape == (321, 481, 3) and img.dtype == np.uint8
        assert label.shape == (321, 481) and label.dtype == np.float32
        np.testing.assert_array_equal(img, want_img)
        np.testing.assert_allclose(label, want_label, rtol=1e-6)
    assert 0 < got[1][1].max() <= 1  # a portrait image, transposed
    assert not ds.shards_itself


def test_caltech101_silhouettes(tmp_path):
    written = write_caltech101_silhouettes(str(tmp_path), {"train": 9, "test": 3, "val": 5})
    ds = Caltech101Silhouettes("val", shuffle=False, dir=str(tmp_path))
    got = list(ds)
    assert len(got) == 5 and got[0][0].shape == (28, 28)
    np.testing.assert_array_equal(np.stack([x for x, _ in got]), written.images["val"])
    assert [int(y) for _, y in got] == written.labels["val"].tolist()


# -- missing files ------------------------------------------------------------------------------


def test_missing_files_are_all_named_with_where_to_get_them(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORPACK_DATASET", str(tmp_path / "td"))
    with pytest.raises(DatasetNotFoundError) as e:
        Mnist("train")
    msg = str(e.value)
    assert isinstance(e.value, FileNotFoundError)
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"):
        assert os.path.join(str(tmp_path / "td"), "mnist_data", name) in msg
    assert "http://yann.lecun.com/exdb/mnist/" in msg and "2 file(s) missing" in msg
    assert str(pickle.loads(pickle.dumps(e.value))) == msg  # travels from worker processes intact

    with pytest.raises(DatasetNotFoundError) as e:
        Cifar10("train", dir=str(tmp_path / "c"))
    folder = os.path.join(str(tmp_path / "c"), "cifar-10-batches-py")
    assert all(os.path.join(folder, f"data_batch_{i}") in str(e.value) for i in range(1, 6))
    assert os.path.join(folder, "batches.meta") in str(e.value) and "cifar-10-python.tar.gz" in str(e.value)

    with pytest.raises(DatasetNotFoundError, match=r"caffe_ilsvrc12\.tar\.gz") as e:
        ILSVRCMeta()
    assert os.path.join(str(tmp_path / "td"), "ilsvrc_metadata", "synsets.txt") in str(e.value)

    for make, needle in (
        (lambda: SVHNDigit("test", str(tmp_path / "s")), "test_32x32.mat"),
        (lambda: BSDS500("train", str(tmp_path / "b")), "BSR_bsds500.tgz"),
        (
            lambda: Caltech101Silhouettes("train", dir=str(tmp_path / "k")),
            "caltech101_silhouettes_28_split1.mat",
        ),
        (lambda: Places365Standard(str(tmp_path / "p"), "val"), "val.txt"),
        (lambda: TinyImageNet(str(tmp_path / "t"), "val"), "val_annotations.txt"),
    ):
        with pytest.raises(DatasetNotFoundError, match=needle):
            make()


def test_ilsvrc12_names_missing_images_and_split_directories(tmp_path):
    written = write_ilsvrc12(str(tmp_path), num_classes=2, train_per_class=2, num_val=2, num_test=1)
    shutil.rmtree(tmp_path / "test")
    with pytest.raises(DatasetNotFoundError) as e:
        ILSVRC12(str(tmp_path), "test", meta_dir=written.meta_dir)
    assert str(tmp_path / "test") in str(e.value) and "image-net.org" in str(e.value)
    os.remove(written.files["val"][1][0])
    with pytest.raises(DatasetNotFoundError) as e:
        ILSVRC12(str(tmp_path), "val", meta_dir=written.meta_dir)
    assert written.files["val"][1][0] in str(e.value)
    os.remove(os.path.join(written.meta_dir, "val.txt"))
    with pytest.raises(DatasetNotFoundError, match=r"val\.txt"):
        ILSVRC12Files(str(tmp_path), "val", meta_dir=written.meta_dir)


# -- epochs and sharding ------------------------------------------------------------------------


def _epochs(make, epochs, rank, world_size, worker, workers):
    sharding.set_worker_info(sharding.WorkerInfo(worker, workers))
    try:
        ds = make(rank=rank, world_size=world_size)
        out = []
        for _ in range(epochs):
            got = [int(label) for _, label in ds]
            assert len(got) == len(ds)
            out.append(got)
        return out
    finally:
        sharding.set_worker_info(None)


@pytest.mark.parametrize("remainder", ["uneven", "pad", "drop"])
def test_workers_and_ranks_together_deliver_each_item_once_per_epoch(tmp_path, remainder):
    """3 ranks x 2 workers over 100 CIFAR records (labels made unique to identify them)."""
    write_cifar(str(tmp_path), per_batch=20)

    def make(rank, world_size):
        ds = Cifar10("train", dir=str(tmp_path), remainder=remainder, rank=rank, world_size=world_size)
        for i, dp in enumerate(ds.data):
            dp[1] = i
        return ds

    parts = {(r, w): _epochs(make, 2, r, 3, w, 2) for r in range(3) for w in range(2)}
    for epoch in range(2):
        seen = [i for part in parts.values() for i in part[epoch]]
        per_rank = collections.Counter()
        for (r, _), part in parts.items():
            per_rank[r] += len(part[epoch])
        counts = collections.Counter(seen)
        if remainder == "uneven":
            assert sorted(seen) == list(range(100)) and sorted(per_rank.values()) == [33, 33, 34]
        elif remainder == "pad":
            assert set(seen) == set(range(100)) and sum(c - 1 for c in counts.values()) == 2
            assert set(per_rank.values()) == {34}
        else:
            assert len(counts) == len(seen) == 99 and set(per_rank.values()) == {33}
    # the epoch's order is the same for everyone: rank 0 worker 0 starts it
    whole = make(0, 1)
    assert parts[(0, 0)][0] == [int(y) for _, y in whole][: len(parts[(0, 0)][0])]


def test_epoch_orders_depend_on_seed_and_epoch_only(data):
    root = data["ilsvrc"].root
    meta = data["ilsvrc"].meta_dir

    def orders(**kw):
        ds = ILSVRC12Files(root, "train", meta_dir=meta, shard=False, **kw)
        return [[p for p, _ in ds] for _ in range(3)]

    a, b = orders(seed=5), orders(seed=5)
    assert a == b and a[0] != a[1] != a[2] and sorted(a[0]) == sorted(a[1])
    assert orders(seed=6)[0] != a[0]
    ds = ILSVRC12Files(root, "train", meta_dir=meta, shard=False, seed=5)
    first = [p for p, _ in ds]  # iterating before reset_state works: epoch 1
    ds.reset_state()
    assert [p for p, _ in ds] == first == a[0]
    unshuffled = ILSVRC12Files(root, "train", meta_dir=meta, shuffle=False, shard=False)
    assert (
        [p for p, _ in unshuffled]
        == [p for p, _ in unshuffled]
        == [p for p, _ in data["ilsvrc"].files["train"]]
    )


def test_only_the_training_split_shards_by_default(data, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    written = data["mnist"]
    train, test = Mnist("train", dir=written.root), Mnist("test", dir=written.root)
    assert train.shards_itself and len(train) == len(list(train)) == 25
    assert not test.shards_itself and len(test) == len(list(test)) == 13
    assert len(Mnist("test", dir=written.root, shard=True, remainder="drop")) == 6
    assert len(Mnist("train", dir=written.root, shard=False)) == 50
    with pytest.raises(ValueError, match="already reads only this process's shard"):
        ShardData(Mnist("train", dir=written.root))
    assert len(ShardData(Mnist("train", dir=written.root, shard=False))) == 25


def test_epoch_order_of_imagenet_size_is_fast():
    class Big(IndexedDataset):
        def __init__(self):
            self._init_order(True, training=True, shard=None, seed=0, remainder="pad", rank=3, world_size=8)

        def _count(self):
            return 1_281_167

    sharding.set_worker_info(sharding.WorkerInfo(1, 4))
    try:
        ds = Big()
        start = time.perf_counter()
        idx = ds.epoch_indices(7)
        elapsed = time.perf_counter() - start
        assert len(idx) == len(ds) == 40037 and len(np.unique(idx)) == len(idx)
    finally:
        sharding.set_worker_info(None)
    assert elapsed < 0.5, elapsed


@pytest.mark.timeout(60)
def test_importing_the_package_loads_neither_tensorflow_nor_scipy():
    code = "import sys, towerpack.dataflow.dataset; print(sorted({'tensorflow', 'scipy'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=50, check=True)
    assert out.stdout.strip() == "[]"


def test_write_jpeg_round_trip_is_close(tmp_path):
    """The writers' images survive JPEG encoding closely enough for label patterns and checks."""
    rng = np.random.default_rng(0)
    from support.image_datasets import synthetic_photo

    img = synthetic_photo(rng, 60, 90, 2, 4)
    back = cv2.imread(write_jpeg(str(tmp_path / "x" / "a.jpg"), img))
    assert back.shape == (60, 90, 3) and np.abs(back.astype(int) - img).mean() < 6
    assert label_from_photo(img, 4) == 2 and label_from_photo(back, 4) == 2


@pytest.mark.timeout(60)
def test_reader_in_worker_processes_of_two_ranks_delivers_each_image_once_per_epoch(tmp_path):
    """2 ranks, each a MultiProcessRunnerZMQ of 2 forked workers decoding ILSVRC12 images."""
    from towerpack.dataflow import MultiProcessRunnerZMQ

    written = write_ilsvrc12(str(tmp_path), num_classes=3, train_per_class=5)
    sizes = {cv2.imread(p).shape: y for p, y in written.files["train"]}
    assert len(sizes) == 15  # the image sizes identify the images
    epochs: list[list[tuple]] = [[], []]
    for rank in range(2):
        ds = ILSVRC12(
            str(tmp_path), "train", meta_dir=written.meta_dir, remainder="uneven", rank=rank, world_size=2
        )
        runner = MultiProcessRunnerZMQ(ds, 2)
        runner.reset_state()
        try:
            for epoch in range(2):
                got = [(img.shape, label) for img, label in runner]
                assert len(got) == len(runner) == len(ds) == 8 - rank
                epochs[epoch] += got
        finally:
            runner.close()
    for got in epochs:
        assert sorted(got) == sorted(sizes.items())
