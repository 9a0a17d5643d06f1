"""Exact pixel results of flips, crops, resizes, transposes, pastes and cutouts, computed independently."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from towerpack.dataflow.imgaug.crop import (
    CenterCrop,
    GoogleNetRandomCropAndResize,
    RandomCrop,
    RandomCropRandomShape,
    RandomCutout,
)
from towerpack.dataflow.imgaug.misc import Flip, RandomResize, Resize, ResizeShortestEdge, Transpose
from towerpack.dataflow.imgaug.paste import CenterPaste, ConstantBackgroundFiller, RandomPaste
from towerpack.dataflow.imgaug.transform import (
    CropTransform,
    FlipTransform,
    NoOpTransform,
    ResizeTransform,
    TransformList,
    TransposeTransform,
)


def _ramp(h: int, w: int, c: int | None = None, dtype=np.uint8) -> np.ndarray:
    """Every pixel distinct (mod 256 for uint8), so misplaced pixels show."""
    shape = (h, w) if c is None else (h, w, c)
    return (np.arange(np.prod(shape)) % 251).reshape(shape).astype(dtype)


@pytest.mark.parametrize(
    "shape, dtype", [((5, 7, 3), np.uint8), ((5, 7, 1), np.float32), ((5, 7), np.float64)]
)
def test_flip_matches_cv2_into_a_new_contiguous_array(shape, dtype):
    # A view (the reference's) would make every later copy a slow strided one.
    img = _ramp(*shape, dtype=dtype)
    horiz = Flip(horiz=True, prob=1.0).augment(img)
    vert = Flip(vert=True, prob=1.0).augment(img)
    np.testing.assert_array_equal(horiz, img[:, ::-1])
    np.testing.assert_array_equal(vert, img[::-1])
    for out in (horiz, vert):
        assert out.shape == img.shape and out.dtype == img.dtype
        assert out.flags.c_contiguous and not np.shares_memory(out, img)
    assert Flip(horiz=True, prob=0.0).augment(img) is img


def test_flip_probability():
    aug = Flip(horiz=True, prob=0.3)
    flips = sum(isinstance(aug.get_transform(_ramp(2, 2)), FlipTransform) for _ in range(2000))
    assert 0.25 * 2000 < flips < 0.35 * 2000


def test_flip_needs_exactly_one_direction():
    with pytest.raises(ValueError, match="both"):
        Flip(horiz=True, vert=True)
    with pytest.raises(ValueError, match="one of"):
        Flip()


def test_crop_transform_is_a_view_and_checks_bounds():
    img = _ramp(6, 8)
    out = CropTransform(1, 2, 3, 4).apply_image(img)
    np.testing.assert_array_equal(out, img[1:4, 2:6])
    assert np.shares_memory(out, img)
    with pytest.raises(ValueError, match=r"does not fit an image of shape \(6, 8\)"):
        CropTransform(4, 0, 3, 4).apply_image(img)


def test_center_crop_offsets():
    img = _ramp(10, 11, 3)
    out = CenterCrop(4).augment(img)
    np.testing.assert_array_equal(out, img[3:7, 3:7])
    np.testing.assert_array_equal(CenterCrop((10, 5)).augment(img), img[:, 3:8])
    with pytest.raises(ValueError, match=r"crop 12x4 is larger than the image 10x11"):
        CenterCrop((12, 4)).augment(img)


def test_random_crop_reaches_every_offset():
    img = _ramp(6, 5)
    aug = RandomCrop((4, 4))
    seen = set()
    for _ in range(300):
        t = aug.get_transform(img)
        np.testing.assert_array_equal(t.apply_image(img), img[t.y0 : t.y0 + 4, t.x0 : t.x0 + 4])
        seen.add((t.y0, t.x0))
    assert seen == {(y, x) for y in range(3) for x in range(2)}


def test_random_crop_random_shape_reaches_the_last_offset_and_full_size():
    img = _ramp(6, 6)
    aug = RandomCropRandomShape(wmin=2, hmin=3, wmax=4)
    sizes, last = set(), False
    for _ in range(600):
        t = aug.get_transform(img)
        sizes.add((t.h, t.w))
        assert t.y0 + t.h <= 6 and t.x0 + t.w <= 6
        last |= t.y0 == 6 - t.h and t.h < 6
    assert sizes == {(h, w) for h in range(3, 7) for w in range(2, 5)}
    assert last  # the reference never picked the last offset
    with pytest.raises(ValueError, match="minimum crop 7x2"):
        RandomCropRandomShape(wmin=2, hmin=7).get_transform(img)


@pytest.mark.parametrize("interp", [cv2.INTER_NEAREST, cv2.INTER_LINEAR, cv2.INTER_CUBIC])
def test_resize_matches_cv2(interp):
    img = _ramp(9, 13, 3, np.float32)
    out = Resize((20, 7), interp).augment(img)
    np.testing.assert_array_equal(out, cv2.resize(img, (7, 20), interpolation=interp))


def test_resize_nearest_doubling_repeats_pixels():
    img = _ramp(3, 4, 1)
    out = Resize((6, 8), cv2.INTER_NEAREST).augment(img)
    assert out.shape == (6, 8, 1) and out.dtype == np.uint8
    np.testing.assert_array_equal(out, img.repeat(2, axis=0).repeat(2, axis=1))


def test_resize_transform_rejects_another_size():
    t = ResizeTransform(4, 5, 8, 10, cv2.INTER_LINEAR)
    with pytest.raises(ValueError, match=r"made for a 4x5 image, got shape \(5, 4\)"):
        t.apply_image(_ramp(5, 4))


def test_resize_shape_argument_errors():
    with pytest.raises(ValueError, match="Resize shape must be an int or a pair"):
        Resize((3, 4, 5))
    assert Resize(np.int64(7)).shape == (7, 7)


def test_resize_shortest_edge_sizes():
    aug = ResizeShortestEdge(256)
    assert aug.augment(_ramp(300, 400, 3)).shape == (256, 341, 3)
    assert aug.augment(_ramp(500, 256)).shape == (500, 256)
    assert aug.augment(_ramp(100, 100)).shape == (256, 256)


def test_random_resize_defaults_work_and_respect_the_aspect_ratio():
    img = _ramp(40, 80)
    aug = RandomResize((0.5, 1.5))  # the reference raised TypeError with these defaults
    for _ in range(50):
        t = aug.get_transform(img)
        assert 20 <= t.new_w <= 120 and 10 <= t.new_h <= 60
        assert abs(t.new_w / t.new_h - 2.0) / 2.0 < 0.15 + 0.03  # rounding to whole pixels
    assert aug.augment(img).ndim == 2


def test_random_resize_pixel_mode_keeps_the_aspect_ratio_without_yrange():
    img = _ramp(40, 80)
    aug = RandomResize((50, 100), minimum=(60, 0))
    for _ in range(50):
        t = aug.get_transform(img)
        assert 60 <= t.new_w <= 100
        assert abs(t.new_w / t.new_h - 2.0) / 2.0 < 0.15


def test_random_resize_scale_mode_without_threshold_scales_both_sides_alike():
    img = _ramp(30, 60)
    aug = RandomResize((0.5, 2.0), aspect_ratio_thres=0)
    for _ in range(30):
        t = aug.get_transform(img)
        assert abs(t.new_w - 2 * t.new_h) <= 1


def test_random_resize_argument_errors():
    with pytest.raises(ValueError, match=r"two floats .* or two ints"):
        RandomResize((0.5, 2))
    with pytest.raises(ValueError, match="both be floats or both ints"):
        RandomResize((0.5, 2.0), (10, 20))


def test_transpose_matches_numpy():
    img = _ramp(4, 6, 3)
    np.testing.assert_array_equal(Transpose(prob=1.0).augment(img), img.transpose(1, 0, 2))
    one = _ramp(4, 6, 1)
    assert Transpose(prob=1.0).augment(one).shape == (6, 4, 1)
    many = _ramp(4, 6, 7, np.float32)
    np.testing.assert_array_equal(TransposeTransform().apply_image(many), many.transpose(1, 0, 2))
    assert isinstance(Transpose(prob=0.0).get_transform(img), NoOpTransform)


def test_googlenet_crop_is_one_view_and_one_resize():
    img = _ramp(60, 80, 3)
    aug = GoogleNetRandomCropAndResize(target_shape=32, interp=cv2.INTER_CUBIC)
    for _ in range(20):
        t = aug.get_transform(img)
        assert isinstance(t, TransformList) and len(t.tfms) == 2
        crop, _ = t.tfms
        view = crop.apply_image(img)
        assert np.shares_memory(view, img)
        expected = cv2.resize(img[crop.y0 : crop.y0 + crop.h, crop.x0 : crop.x0 + crop.w], (32, 32),
                              interpolation=cv2.INTER_CUBIC)  # fmt: skip
        np.testing.assert_array_equal(t.apply_image(img), expected)
        assert 0.08 * 4800 - 100 <= crop.h * crop.w <= 4800


def test_googlenet_falls_back_to_resize_and_center_crop():
    img = _ramp(100, 10, 3)
    aug = GoogleNetRandomCropAndResize(
        crop_area_fraction=(0.9, 1.0), aspect_ratio_range=(1.0, 1.0), target_shape=8
    )
    out = aug.augment(img)
    expected = cv2.resize(img, (8, 80), interpolation=cv2.INTER_LINEAR)[36:44]
    np.testing.assert_array_equal(out, expected)
    with pytest.raises(ValueError, match="target_shape must be an int"):
        GoogleNetRandomCropAndResize(target_shape=(224, 224))


def test_random_cutout_fills_a_rectangle_in_place():
    img = _ramp(20, 30, 3, np.float32) + 1
    orig = img.copy()
    aug = RandomCutout((3, 6), 4, fill=-1.0)
    sizes = set()
    for _ in range(100):
        img[...] = orig
        out = aug.augment(img)
        assert out is img
        rows, cols = np.nonzero(np.all(out == -1.0, axis=2))
        h, w = rows.max() - rows.min() + 1, cols.max() - cols.min() + 1
        assert len(rows) == h * w and w == 4 and 3 <= h < 6
        sizes.add(h)
        keep = np.ones(out.shape[:2], bool)
        keep[rows, cols] = False
        np.testing.assert_array_equal(out[keep], orig[keep])
    assert sizes == {3, 4, 5}
    with pytest.raises(ValueError, match="low < high"):
        RandomCutout((5, 5), 2)


def test_center_paste_and_coords():
    img = _ramp(3, 4, 3)
    out = CenterPaste((7, 9), ConstantBackgroundFiller(7)).augment(img)
    expected = np.full((7, 9, 3), 7, np.uint8)
    expected[2:5, 2:6] = img
    np.testing.assert_array_equal(out, expected)
    t = CenterPaste((7, 9)).get_transform(img)
    np.testing.assert_array_equal(t.apply_coords(np.array([[1.0, 2.0]])), [[3.0, 4.0]])
    with pytest.raises(ValueError, match="image 3x4 is larger than the background 2x9"):
        CenterPaste((2, 9)).augment(img)


def test_random_paste_works_without_reset_and_reaches_every_offset():
    img = _ramp(3, 3)
    aug = RandomPaste((5, 4))  # the reference had no rng until reset_state()
    offsets = set()
    for _ in range(300):
        t = aug.get_transform(img)
        out = t.apply_image(img)
        np.testing.assert_array_equal(out[t.y0 : t.y0 + 3, t.x0 : t.x0 + 3], img)
        assert out.sum() == img.sum()
        offsets.add((t.y0, t.x0))
    assert offsets == {(y, x) for y in range(3) for x in range(2)}
    np.testing.assert_array_equal(RandomPaste((3, 3)).augment(img), img)
