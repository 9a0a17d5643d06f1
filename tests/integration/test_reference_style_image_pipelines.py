"""Image data pipelines written as a tensorpack user writes them deliver what training relies on, from
real files in the original on-disk formats and through real worker processes.

The pipelines (CIFAR ``get_cifar_data``, ImageNet ``get_imagenet_dataflow``, a detection mapper with
a transform-based resize, and that mapper in the older augmentor API) are ours, written in the
reference's style in :mod:`support.reference_style_image_code`. The data are small datasets written by
:mod:`support.image_datasets` in the exact on-disk formats the readers expect, under
``$TENSORPACK_DATASET`` as the readers' default paths need. The checks: every image once per epoch
in a new order, the validation list in order and preprocessed as defined, boxes moving with the image.
"""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from support import reference_style_image_code as user
from support.image_datasets import synthetic_photo, write_cifar, write_ilsvrc12
from towerpack.dataflow import (
    AugmentImageCoordinates,
    DataFromList,
    MultiProcessMapData,
    MultiProcessRunnerZMQ,
    imgaug,
)

pytestmark = pytest.mark.slow

#: The training flow batches per worker (remainder dropped): with two full batches per worker an
#: epoch holds every image once.
CIFAR_TRAIN = 2 * user.CIFAR_WORKERS * user.CIFAR_BATCH
CIFAR_TEST = 2 * user.CIFAR_BATCH + 20  # two batches and a remainder batch
CROP = user.CIFAR_CROP


# ---- CIFAR ---------------------------------------------------------------------------------------


@pytest.fixture
def dataset_root(tmp_path, monkeypatch):
    """``$TENSORPACK_DATASET``: the readers' default directories live under it."""
    root = tmp_path / "tensorpack_data"
    root.mkdir()
    monkeypatch.setenv("TENSORPACK_DATASET", str(root))
    return root


def _write_cifar(root, classnum):
    # The training split is write_cifar's 5 * per_batch records (five CIFAR-10 batch files, or
    # CIFAR-100's single train file).
    return write_cifar(
        str(root / f"cifar{classnum}_data"),
        classnum=classnum,
        per_batch=CIFAR_TRAIN // 5,
        num_test=CIFAR_TEST,
    )


def _normalized(images: np.ndarray) -> np.ndarray:
    """MeanVarianceNormalize(all_channel=True) of each image, computed here from its definition."""
    x = images.astype(np.float64)
    mean = x.mean(axis=(1, 2, 3), keepdims=True)
    std = np.maximum(x.std(axis=(1, 2, 3), keepdims=True), 1 / np.sqrt(x[0].size))
    return (x - mean) / std


def _crop_candidates(images: np.ndarray, size: int) -> np.ndarray:
    """Every ``size`` crop of every image, unflipped and flipped: (N, crops, size*size*3), each
    channel centred and each vector scaled to unit length (so a dot product is a correlation)."""
    n, h, w, _ = images.shape
    crops = []
    for y in range(h - size + 1):
        for x in range(w - size + 1):
            c = images[:, y : y + size, x : x + size].astype(np.float32)
            crops += [c, c[:, :, ::-1]]
    out = np.stack(crops, axis=1)
    out -= out.mean(axis=(2, 3), keepdims=True)
    out = out.reshape(n, len(crops), -1)
    return out / np.linalg.norm(out, axis=2, keepdims=True)


def _identify(outputs: np.ndarray, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each augmented output, the source image whose crops correlate best with it, and by how
    much that correlation beats the next-best image's (clipped colour ops keep the best near 0.9,
    the next-best image stays below 0.8)."""
    x = outputs.astype(np.float32)
    x = x - x.mean(axis=(1, 2), keepdims=True)
    x = x.reshape(len(x), -1)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    n, k, d = candidates.shape
    per_image = (x @ candidates.reshape(n * k, d).T).reshape(len(x), n, k).max(axis=2)
    top2 = np.sort(per_image, axis=1)[:, -2:]
    return per_image.argmax(axis=1), top2[:, 1] - top2[:, 0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("classnum", [10, 100])
def test_cifar_get_data_gives_every_image_once_per_epoch(dataset_root, classnum):
    written = _write_cifar(dataset_root, classnum)
    batch = user.CIFAR_BATCH

    # The test split: in order, centre-cropped, normalised, with the remainder batch.
    test = user.get_cifar_data("test", classnum)
    test.reset_state()
    batches = list(test)
    assert [len(b[1]) for b in batches] == [batch, batch, CIFAR_TEST - 2 * batch]
    images = np.concatenate([b[0] for b in batches])
    labels = np.concatenate([b[1] for b in batches])
    assert images.dtype == np.float32 and images.shape == (CIFAR_TEST, CROP, CROP, 3)
    assert np.issubdtype(labels.dtype, np.integer)
    np.testing.assert_array_equal(labels, written.labels["test"])
    margin = (32 - CROP) // 2
    expected = _normalized(written.images["test"][:, margin : margin + CROP, margin : margin + CROP])
    np.testing.assert_allclose(images, expected, atol=2e-5)

    # The training split through MultiProcessRunnerZMQ: every image once per epoch.
    train = user.get_cifar_data("train", classnum)
    assert isinstance(train, MultiProcessRunnerZMQ) and train.num_proc == user.CIFAR_WORKERS
    train.reset_state()
    try:
        candidates = _crop_candidates(written.images["train"], CROP)
        orders = []
        for _ in range(2):
            batches = list(train)
            assert len(batches) == CIFAR_TRAIN // batch
            for img, label in batches:
                assert img.shape == (batch, CROP, CROP, 3) and img.dtype == np.float32
                assert np.issubdtype(label.dtype, np.integer)
                assert label.min() >= 0 and label.max() < classnum
                flat = img.reshape(batch, -1).astype(np.float64)
                np.testing.assert_allclose(flat.mean(axis=1), 0, atol=1e-4)
                np.testing.assert_allclose(flat.std(axis=1), 1, atol=1e-3)
            images = np.concatenate([b[0] for b in batches])
            labels = np.concatenate([b[1] for b in batches])
            source, margin = _identify(images, candidates)
            assert margin.min() > 0.05, (
                f"an output matches no training image clearly (margin {margin.min():.3f})"
            )
            assert sorted(source.tolist()) == list(range(CIFAR_TRAIN)), "not every image exactly once"
            np.testing.assert_array_equal(labels, written.labels["train"][source])
            orders.append(source)
        assert not np.array_equal(orders[0], orders[1]), "the training order did not change between epochs"
    finally:
        train.close()


# ---- ImageNet ------------------------------------------------------------------------------------


@pytest.fixture
def ilsvrc(dataset_root, tmp_path):
    """ILSVRC12 with one training image per class (so labels identify images), ImageNet-sized photos,
    and its caffe meta files in the default ``$TENSORPACK_DATASET/ilsvrc_metadata``.

    Writing the photos resizes large images with OpenCV in this process, so its thread pool is
    running when the workers fork, as in a script that touched images before training.
    """
    return write_ilsvrc12(
        str(tmp_path / "ilsvrc12"),
        meta_dir=str(dataset_root / "ilsvrc_metadata"),
        num_classes=12,
        train_per_class=1,
        num_val=10,
        num_test=0,
        imagenet_like=True,
    )


@pytest.mark.timeout(30)
def test_imagenet_train_dataflow_gives_every_image_once_per_epoch(ilsvrc):
    size = user.IMAGENET_SIZE
    ds = user.get_imagenet_dataflow(ilsvrc.root, "train", 4, parallel=2)
    ds.reset_state()
    try:
        epochs = []
        for _ in range(2):
            batches = list(ds)
            assert len(batches) == 3
            for img, label in batches:
                assert img.shape == (4, size, size, 3) and img.dtype == np.uint8
                assert label.shape == (4,) and np.issubdtype(label.dtype, np.integer)
                assert img.std() > 5, "augmented images are (nearly) constant"
            labels = np.concatenate([b[1] for b in batches]).tolist()
            assert sorted(labels) == list(range(12)), f"epoch labels {labels}: not every image once"
            epochs.append(labels)
        assert epochs[0] != epochs[1], "the shuffle gave the same order twice"
    finally:
        ds.ds.close()


def _expected_val_image(path: str) -> np.ndarray:
    """The validation preprocessing of one file, computed here from its definition."""
    im = cv2.imread(path, cv2.IMREAD_COLOR)
    h, w = im.shape[:2]
    short, size = user.IMAGENET_VAL_SHORT_EDGE, user.IMAGENET_SIZE
    scale = short / min(h, w)
    nh, nw = (short, int(scale * w + 0.5)) if h < w else (int(scale * h + 0.5), short)
    im = cv2.resize(im, (nw, nh), interpolation=cv2.INTER_AREA)
    y0, x0 = (nh - size) // 2, (nw - size) // 2
    return im[y0 : y0 + size, x0 : x0 + size]


@pytest.mark.timeout(30)
def test_imagenet_val_dataflow_is_the_val_list_in_order(ilsvrc):
    ds = user.get_imagenet_dataflow(ilsvrc.root, "val", 4, parallel=2)
    ds.reset_state()
    try:
        batches = list(ds)
    finally:
        ds.close()
    assert [len(b[1]) for b in batches] == [4, 4, 2]
    images = np.concatenate([b[0] for b in batches])
    labels = np.concatenate([b[1] for b in batches])
    size = user.IMAGENET_SIZE
    assert images.shape == (10, size, size, 3) and images.dtype == np.uint8
    assert labels.tolist() == [label for _, label in ilsvrc.files["val"]]
    for got, (path, _) in zip(images, ilsvrc.files["val"], strict=True):
        np.testing.assert_array_equal(got, _expected_val_image(path))


# ---- Detection: a resize and a flip move the boxes with the image ---------------------------------

#: Pure BGR colours of the drawn objects; the background is a dim grey gradient.
_COLOURS = [(255, 0, 0), (0, 255, 0), (0, 0, 255)]


def _detection_image(rng: np.random.Generator, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """A grey image with one filled rectangle per colour; its ``(3, 4)`` float32 x1y1x2y2 boxes
    (pixel edges: a box covers columns x1 .. x2 - 1)."""
    gray = cv2.cvtColor(synthetic_photo(rng, h, w), cv2.COLOR_BGR2GRAY) // 3
    img = np.repeat(gray[:, :, None], 3, axis=2)
    boxes = []
    column = w // len(_COLOURS)  # one object per column, so none hides another
    for k, colour in enumerate(_COLOURS):
        bw, bh = int(rng.integers(column // 4, column - 4)), int(rng.integers(h // 8, h // 2))
        x1, y1 = k * column + int(rng.integers(0, column - bw)), int(rng.integers(0, h - bh))
        img[y1 : y1 + bh, x1 : x1 + bw] = colour
        boxes.append([x1, y1, x1 + bw, y1 + bh])
    return img, np.array(boxes, np.float32)


def _object_boxes(img: np.ndarray) -> np.ndarray:
    """The x1y1x2y2 pixel-edge box of each colour's object, found by its pixels."""
    out = []
    for c in range(len(_COLOURS)):
        others = [o for o in range(3) if o != c]
        mask = (img[:, :, c] > 200) & (img[:, :, others].max(axis=2) < 90)
        ys, xs = np.nonzero(mask)
        assert len(xs), f"object {c} vanished"
        out.append([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
    return np.array(out, np.float32)


def _assert_boxes_enclose_objects(img: np.ndarray, boxes: np.ndarray) -> None:
    objects = _object_boxes(img)
    assert boxes.shape == objects.shape
    # Each box encloses its object's pixels and is tight around them (to interpolation's 1-2 px).
    assert np.all(boxes[:, :2] <= objects[:, :2] + 0.5) and np.all(boxes[:, 2:] >= objects[:, 2:] - 0.5), (
        boxes,
        objects,
    )
    np.testing.assert_allclose(boxes, objects, atol=2.0)


@pytest.fixture
def detection_images(tmp_path):
    rng = np.random.default_rng(7)
    sizes = [(300, 400), (400, 300), (200, 480), (360, 360)] * 4
    out = []
    for i, (h, w) in enumerate(sizes):
        img, boxes = _detection_image(rng, h, w)
        # PNG: lossless, so the objects' colours stay pure.
        path = str(tmp_path / f"img_{i}.png")
        cv2.imwrite(path, img)
        out.append(
            {"file_name": path, "boxes": boxes, "class": np.arange(1, 4), "is_crowd": np.zeros(3, int)}
        )
    return out


@pytest.mark.timeout(30)
def test_detection_mapper_moves_boxes_with_the_image(detection_images):
    # Short edge 200-240 with at most 320 on the long edge: 200x480 images hit the cap.
    preprocess = user.DetectionTrainMapper((200, 240), 320)
    flipped = 0
    for record in detection_images:
        im, boxes = preprocess(record)
        h, w = cv2.imread(record["file_name"]).shape[:2]
        assert im.dtype == np.float32 and boxes.dtype == np.float32
        assert 200 <= min(im.shape[:2]) <= 240 or max(im.shape[:2]) == 320
        assert max(im.shape[:2]) <= 320
        assert abs(im.shape[1] / im.shape[0] - w / h) < 0.02
        _assert_boxes_enclose_objects(im, boxes)
        scale = im.shape[1] / w
        flipped += bool(abs(boxes[0, 0] - record["boxes"][0, 0] * scale) > 2)
    assert 0 < flipped < len(detection_images), f"{flipped} of {len(detection_images)} flipped"

    # The mapper in worker processes, as a detection training dataflow runs it.
    ds = MultiProcessMapData(DataFromList(detection_images, shuffle=False), 2, preprocess, buffer_size=8)
    ds.reset_state()
    try:
        results = list(ds)
    finally:
        ds.close()
    assert len(results) == len(detection_images)
    for im, boxes in results:
        _assert_boxes_enclose_objects(im, boxes)


@pytest.mark.timeout(30)
def test_detection_augmentors_through_augment_image_coordinates(detection_images):
    points = [
        [cv2.imread(d["file_name"], cv2.IMREAD_COLOR), user.box_corners(d["boxes"]), i]
        for i, d in enumerate(detection_images)
    ]
    augmentors = [user.ShortEdgeResize(240, 320), imgaug.Flip(horiz=True)]
    ds = AugmentImageCoordinates(DataFromList(points, shuffle=False), augmentors, img_index=0, coords_index=1)
    ds = MultiProcessRunnerZMQ(ds, 2)
    ds.reset_state()
    try:
        results = list(ds)
    finally:
        ds.close()
    assert len(results) == len(points)
    for img, coords, i in results:
        h, w = points[int(i)][0].shape[:2]
        assert img.dtype == np.uint8 and coords.shape == (12, 2)
        assert max(img.shape[:2]) <= 320 and abs(img.shape[1] / img.shape[0] - w / h) < 0.02
        _assert_boxes_enclose_objects(img, user.enclosing_boxes(coords))


@pytest.mark.timeout(30)
def test_older_augmentor_api_moves_boxes_with_the_image(detection_images):
    # _get_augment_params returning a transform, augment_return_params and augment_coords.
    preprocess = user.legacy_detection_train_mapper(240, 320)
    flipped = 0
    for record in detection_images:
        im, boxes = preprocess(record)
        assert im.dtype == np.float32 and max(im.shape[:2]) <= 320
        assert min(im.shape[:2]) == 240 or max(im.shape[:2]) == 320
        _assert_boxes_enclose_objects(im, boxes)
        scale = im.shape[1] / cv2.imread(record["file_name"]).shape[1]
        flipped += bool(abs(boxes[0, 0] - record["boxes"][0, 0] * scale) > 2)
    assert 0 < flipped < len(detection_images), f"{flipped} of {len(detection_images)} flipped"
