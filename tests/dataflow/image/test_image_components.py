"""Image components and decoding: ImageFromFile, AugmentImage*, decode_image's errors."""

from __future__ import annotations

import logging
import re

import cv2
import numpy as np
import pytest

from towerpack.dataflow import DataFromList
from towerpack.dataflow.image.dataflows import (
    AugmentImageComponent,
    AugmentImageComponents,
    AugmentImageCoordinates,
    ImageFromFile,
)
from towerpack.dataflow.image.decode import ImageDecodeError, decode_image, read_image
from towerpack.dataflow.imgaug.base import PhotometricAugmentor
from towerpack.dataflow.imgaug.crop import RandomCrop
from towerpack.dataflow.imgaug.geometry import Rotation
from towerpack.dataflow.imgaug.misc import Flip, Resize


def _epoch(df):
    df.reset_state()
    return list(df)


def _gradient(h=20, w=30):
    """A smooth uint8 BGR image whose every pixel differs from its mirror images (h, w <= 80)."""
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([x * 3, y * 3, x + y], axis=-1).astype(np.uint8)


class ZeroTopRow(PhotometricAugmentor):
    """Writes into its input, as the reference's noise and cutout augmentors do."""

    def _augment(self, img, _):
        img[0] = 0
        return img


# -- decoding -----------------------------------------------------------------------------------


@pytest.fixture
def jpeg_bytes():
    ok, buf = cv2.imencode(".jpg", _gradient(60, 80), [cv2.IMWRITE_JPEG_QUALITY, 95])
    assert ok
    return buf.tobytes()


def test_decode_colors_and_shapes(jpeg_bytes):
    bgr = decode_image(jpeg_bytes)
    rgb = decode_image(np.frombuffer(jpeg_bytes, np.uint8), color="rgb")
    gray = decode_image(bytearray(jpeg_bytes), color="GRAY")
    assert bgr.shape == (60, 80, 3) and bgr.dtype == np.uint8
    np.testing.assert_array_equal(rgb, bgr[:, :, ::-1])
    assert gray.shape == (60, 80)
    # JPEG is lossy, but a q95 encode of a smooth image stays within a few levels.
    assert np.abs(bgr.astype(int) - _gradient(60, 80)).mean() < 3


@pytest.mark.parametrize(
    "data, what",
    [
        (lambda b: b[: len(b) // 2], "truncated"),
        (lambda b: b[:-2], "missing end marker"),
        (lambda b: np.random.RandomState(0).bytes(4000), "random bytes"),
        (lambda b: b"", "empty"),
    ],
)
def test_decode_errors_name_the_source(jpeg_bytes, data, what):
    with pytest.raises(ImageDecodeError, match="shard-7/0042"):
        decode_image(data(jpeg_bytes), source="shard-7/0042")


def test_decode_rejects_non_bytes():
    with pytest.raises(TypeError, match="uint8 array, got dtype float32"):
        decode_image(np.zeros(10, np.float32))
    with pytest.raises(ValueError, match="color must be one of"):
        decode_image(b"xx", color="HSV")


def test_read_image_errors_name_the_file(tmp_path, jpeg_bytes):
    bad = tmp_path / "cut.jpg"
    bad.write_bytes(jpeg_bytes[:300])
    with pytest.raises(ImageDecodeError, match=re.escape(str(bad))):
        read_image(bad)
    with pytest.raises(FileNotFoundError, match=r"nothere\.png"):
        read_image(tmp_path / "nothere.png")


# -- ImageFromFile -------------------------------------------------------------------------------


@pytest.fixture
def image_files(tmp_path):
    """Three lossless PNGs (BGR on disk) of different sizes; image i is filled with BGR (i, 100, 200)."""
    files = []
    for i, (h, w) in enumerate([(10, 12), (7, 9), (16, 5)]):
        path = tmp_path / f"img{i}.png"
        cv2.imwrite(str(path), np.full((h, w, 3), (i, 100, 200), np.uint8))
        files.append(str(path))
    return files


def test_image_from_file_yields_rgb(image_files):
    out = _epoch(ImageFromFile(image_files))
    assert [dp[0].shape for dp in out] == [(10, 12, 3), (7, 9, 3), (16, 5, 3)]
    for i, (img,) in enumerate(out):
        assert img.dtype == np.uint8
        assert (img == np.array([200, 100, i], np.uint8)).all()  # RGB


def test_image_from_file_gray_and_resize(image_files):
    out = _epoch(ImageFromFile(image_files, channel=1, resize=(6, 4)))
    assert [dp[0].shape for dp in out] == [(6, 4, 1)] * 3
    # The decoder's own grey conversion may round differently from cvtColor's by one level.
    expected = int(cv2.cvtColor(np.full((1, 1, 3), (0, 100, 200), np.uint8), cv2.COLOR_BGR2GRAY)[0, 0])
    assert np.abs(out[0][0].astype(int) - expected).max() <= 1
    assert _epoch(ImageFromFile(image_files, resize=8))[1][0].shape == (8, 8, 3)


def test_image_from_file_shuffles_its_own_list(image_files):
    files = list(image_files)
    df = ImageFromFile(files, shuffle=True)
    df.reset_state()
    orders = [[int(dp[0][0, 0, 2]) for dp in df] for _ in range(6)]
    assert files == image_files  # the caller's list is untouched
    assert all(sorted(o) == [0, 1, 2] for o in orders)
    assert len({tuple(o) for o in orders}) > 1


def test_image_from_file_bad_input(tmp_path, image_files):
    text = tmp_path / "notes.jpg"
    text.write_text("not an image")
    with pytest.raises(ImageDecodeError, match=r"notes\.jpg"):
        _epoch(ImageFromFile([*image_files, str(text)]))
    with pytest.raises(ValueError, match="no image files"):
        ImageFromFile([])
    with pytest.raises(ValueError, match="channel must be 1 or 3"):
        ImageFromFile(image_files, channel=4)
    with pytest.raises(ValueError, match="resize"):
        ImageFromFile(image_files, resize=(3, 0))


# -- AugmentImageComponent -------------------------------------------------------------------------


def test_flip_prob_one_flips_exactly():
    img = _gradient()
    out = _epoch(AugmentImageComponent(DataFromList([[img, 5]], shuffle=False), [Flip(horiz=True, prob=1.0)]))
    assert len(out) == 1
    np.testing.assert_array_equal(out[0][0], img[:, ::-1])
    assert out[0][1] == 5


def test_component_index_by_key_and_tuple_datapoints():
    img = _gradient()
    flip = [Flip(vert=True, prob=1.0)]
    (d,) = _epoch(AugmentImageComponent(DataFromList([{"im": img, "y": 1}], shuffle=False), flip, index="im"))
    np.testing.assert_array_equal(d["im"], img[::-1])
    (t,) = _epoch(AugmentImageComponent(DataFromList([(3, img)], shuffle=False), flip, index=1))
    assert isinstance(t, tuple) and t[0] == 3
    np.testing.assert_array_equal(t[1], img[::-1])


def test_copy_protects_the_source_from_in_place_augmentors():
    img = _gradient()
    pristine = img.copy()
    (out,) = _epoch(AugmentImageComponent(DataFromList([[img]], shuffle=False), [ZeroTopRow()]))
    np.testing.assert_array_equal(img, pristine)
    assert (out[0][0] == 0).all() and (out[0][1:] == pristine[1:]).all()
    _epoch(AugmentImageComponent(DataFromList([[img]], shuffle=False), [ZeroTopRow()], copy=False))
    assert (img[0] == 0).all()  # without the copy the source is changed


def test_copy_protects_all_components():
    img, mask = _gradient(), np.full((20, 30), 7, np.uint8)
    coords = np.array([[1.0, 2.0]], np.float32)
    dp = [img, mask, coords]
    df = AugmentImageComponents(
        DataFromList([dp], shuffle=False), [ZeroTopRow(), Flip(horiz=True, prob=1.0)], (0, 1), (2,)
    )
    (out,) = _epoch(df)
    assert (img == _gradient()).all() and (mask == 7).all() and (coords == [[1.0, 2.0]]).all()
    assert dp[0] is img  # the input datapoint is not modified either
    np.testing.assert_allclose(out[2], [[29.0, 2.0]])
    assert (out[1][0] == 0).all()  # masks get the same apply_image (photometric ops included)


def test_catch_exceptions_counts_logs_and_drops(caplog):
    big, small = np.zeros((50, 50), np.float32), np.zeros((30, 30), np.float32)
    dps = [[big if i % 3 else small, i] for i in range(30)]  # 10 too small for the crop
    df = AugmentImageComponent(DataFromList(dps, shuffle=False), [RandomCrop(40)], catch_exceptions=True)
    with caplog.at_level(logging.ERROR, logger="towerpack.dataflow.image.dataflows"):
        out = _epoch(df)
    assert [dp[1] for dp in out] == [i for i in range(30) if i % 3]
    assert all(dp[0].shape == (40, 40) for dp in out)
    assert df.errors.count == 10
    records = [r for r in caplog.records if "augmentation errors" in r.getMessage()]
    assert len(records) == 10 and records[-1].exc_info is not None
    assert "larger than the image" in caplog.text
    _epoch(df)  # the 11th to 20th errors: only every 100th is logged from now on
    assert (
        df.errors.count == 20
        and len([r for r in caplog.records if "augmentation errors" in r.getMessage()]) == 10
    )

    strict = AugmentImageComponent(DataFromList(dps, shuffle=False), [RandomCrop(40)])
    with pytest.raises(ValueError, match="larger than the image"):
        _epoch(strict)
    assert strict.errors.count == 1


def test_bad_images_are_errors_even_when_catching():
    df = AugmentImageComponent(
        DataFromList([[np.zeros((4, 4), np.int32)]], shuffle=False), [Flip(horiz=True)], catch_exceptions=True
    )
    with pytest.raises(TypeError, match=r"component 0.*int32"):
        _epoch(df)
    with pytest.raises(TypeError, match="list of augmentors"):
        AugmentImageComponent(DataFromList([], shuffle=False), Flip(horiz=True))


# -- coordinates -----------------------------------------------------------------------------------


def _box_scene(h=80, w=100, box=(20, 15, 61, 41)):
    """A black image with a white filled box, and the box's four corners as (x, y) edge coordinates."""
    x0, y0, x1, y1 = box
    img = np.zeros((h, w, 3), np.uint8)
    img[y0:y1, x0:x1] = 255
    corners = np.array([[x0, y0], [x1, y0], [x0, y1], [x1, y1]], np.float32)
    return img, corners


def _check_box_consistent(img, corners, slack=1.5):
    """The white pixels lie in the transformed box (its corners' bounding box), and fill most of it."""
    ys, xs = np.nonzero(img[..., 0] > 128)
    assert len(xs) > 0
    lo, hi = corners.min(axis=0), corners.max(axis=0)
    assert xs.min() >= lo[0] - slack and xs.max() + 1 <= hi[0] + slack
    assert ys.min() >= lo[1] - slack and ys.max() + 1 <= hi[1] + slack
    cx, cy = corners.mean(axis=0)
    assert 0 <= cx < img.shape[1] and 0 <= cy < img.shape[0]
    assert img[int(cy), int(cx), 0] > 128  # the box's centre stays inside the white region


@pytest.mark.parametrize(
    "augs",
    [
        [Flip(horiz=True, prob=1.0)],
        [Flip(vert=True, prob=1.0), Resize((40, 150))],
        [RandomCrop((60, 70))],
        [Flip(horiz=True), Resize((120, 90)), RandomCrop((100, 80))],
    ],
    ids=["hflip", "vflip-resize", "crop", "flip-resize-crop"],
)
def test_detection_pipeline_keeps_boxes_on_their_pixels(augs):
    img, corners = _box_scene()
    ds = DataFromList([[img, corners, "id"]] * 10, shuffle=False)
    for out_img, out_corners, tag in _epoch(AugmentImageCoordinates(ds, augs)):
        assert tag == "id"
        _check_box_consistent(out_img, out_corners)
    # With a mask as a second image: the transform drawn from the major image moves it identically.
    mask = np.ascontiguousarray(img[..., 0])
    ds = DataFromList([(img, corners, mask)] * 10, shuffle=False)
    for out_img, out_corners, out_mask in _epoch(AugmentImageComponents(ds, augs, (0, 2), (1,))):
        _check_box_consistent(out_img, out_corners)
        np.testing.assert_array_equal(out_mask, out_img[..., 0])


def test_rotation_moves_the_box_corners_with_the_pixels():
    img, corners = _box_scene()
    # About a centre near the image's, the box stays in the image; its rotated corners' bounding
    # box must hold the rotated pixels.
    rotation = Rotation(30, center_range=(0.4, 0.6), border=cv2.BORDER_CONSTANT)
    df = AugmentImageComponents(DataFromList([[img, corners]] * 10, shuffle=False), [rotation], (0,), (1,))
    for out_img, out_corners in _epoch(df):
        _check_box_consistent(out_img, out_corners, slack=2.0)


def test_coordinate_checks():
    img, corners = _box_scene()
    flip = [Flip(horiz=True, prob=1.0)]
    (dp,) = _epoch(
        AugmentImageCoordinates(DataFromList([(img, corners.astype(np.float64))], shuffle=False), flip)
    )
    assert isinstance(dp, tuple)
    np.testing.assert_allclose(dp[1][:, 0], [80, 39, 80, 39])
    for bad, msg in [(corners.astype(np.int64), "floating point"), (corners[:, :1], r"Nx2.*\(4, 1\)")]:
        with pytest.raises(TypeError, match=msg):
            _epoch(
                AugmentImageCoordinates(
                    DataFromList([[img, bad]], shuffle=False), flip, catch_exceptions=True
                )
            )
