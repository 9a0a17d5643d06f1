"""Coordinates follow the pixels: round trips, and warped points land where the warped image's mark is."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from towerpack.dataflow.imgaug.base import AugmentorList
from towerpack.dataflow.imgaug.crop import RandomCrop
from towerpack.dataflow.imgaug.geometry import Affine, Rotation, RotationAndCropValid, Shift
from towerpack.dataflow.imgaug.misc import Flip, Resize, Transpose
from towerpack.dataflow.imgaug.transform import (
    CropTransform,
    FlipTransform,
    ResizeTransform,
    TransposeTransform,
    WarpAffineTransform,
)


def _marked(h: int, w: int, x: int, y: int) -> np.ndarray:
    """A float32 image, zero except a 3x3 block of ones centred on pixel (x, y)."""
    img = np.zeros((h, w), np.float32)
    img[y - 1 : y + 2, x - 1 : x + 2] = 1.0
    return img


def _centroid(img: np.ndarray) -> np.ndarray:
    ys, xs = np.mgrid[: img.shape[0], : img.shape[1]]
    total = img.sum()
    return np.array([(xs * img).sum() / total, (ys * img).sum() / total])


def test_flip_twice_is_identity_for_coords():
    coords = np.array([[0.0, 0.0], [3.5, 2.0], [10.0, 7.0]], np.float32)
    for horiz in (True, False):
        t = FlipTransform(8, 10, horiz=horiz)
        once = t.apply_coords(coords.copy())
        assert not np.allclose(once, coords)
        np.testing.assert_allclose(t.apply_coords(once), coords)


def test_flip_coords_use_pixel_edges():
    t = FlipTransform(8, 10, horiz=True)
    np.testing.assert_allclose(t.apply_coords(np.array([[0.0, 1.0], [10.0, 2.0]])), [[10.0, 1.0], [0.0, 2.0]])
    t = FlipTransform(8, 10, horiz=False)
    np.testing.assert_allclose(t.apply_coords(np.array([[3.0, 0.0]])), [[3.0, 8.0]])


def test_coordinate_methods_work_in_place_and_check_shape():
    coords = np.array([[1.0, 2.0]], np.float32)
    out = CropTransform(1, 1, 2, 2).apply_coords(coords)
    assert out is coords
    np.testing.assert_allclose(coords, [[0.0, 1.0]])
    with pytest.raises(ValueError, match=r"Nx2 array of \(x, y\), got shape \(3,\)"):
        CropTransform(0, 0, 1, 1).apply_coords(np.zeros(3))
    ints = CropTransform(1, 1, 2, 2).apply_coords(np.array([[3, 3]]))
    assert ints.dtype == np.float32
    np.testing.assert_allclose(ints, [[2.0, 2.0]])


def test_resize_and_transpose_coords():
    t = ResizeTransform(10, 20, 30, 10, cv2.INTER_LINEAR)
    np.testing.assert_allclose(
        t.apply_coords(np.array([[20.0, 10.0], [4.0, 5.0]])), [[10.0, 30.0], [2.0, 15.0]]
    )
    np.testing.assert_allclose(TransposeTransform().apply_coords(np.array([[1.0, 7.0]])), [[7.0, 1.0]])


def test_transpose_moves_the_marked_pixel_where_coords_say():
    img = _marked(12, 20, x=15, y=4)
    t = Transpose(prob=1.0).get_transform(img)
    out = t.apply_image(img)
    np.testing.assert_allclose(_centroid(out), t.apply_coords(np.array([[15.0, 4.0]]))[0])


def test_shift_moves_the_marked_pixel_exactly():
    img = _marked(30, 40, x=20, y=15)
    aug = Shift(horiz_frac=0.2, vert_frac=0.2, border=cv2.BORDER_CONSTANT)
    moved = 0
    for _ in range(10):
        t = aug.get_transform(img)
        out = t.apply_image(img)
        point = t.apply_coords(np.array([[20.0, 15.0]]))[0]
        np.testing.assert_allclose(_centroid(out), point, atol=1e-4)
        assert out[int(point[1]), int(point[0])] == 1.0
        moved += not np.allclose(point, [20, 15])
    assert moved > 0


@pytest.mark.parametrize(
    "aug",
    [
        Rotation(40, center_range=(0.3, 0.7), border=cv2.BORDER_CONSTANT),
        Rotation(180, center_range=(0.4, 0.6), step_deg=90, border=cv2.BORDER_CONSTANT),
        Affine(
            scale=(0.8, 1.2),
            translate_frac=(0.1, 0.1),
            rotate_max_deg=30,
            shear=15,
            border=cv2.BORDER_CONSTANT,
        ),
    ],
    ids=["rotation", "rotation-step", "affine"],
)
def test_warped_mark_lands_on_the_mapped_point(aug):
    img = _marked(41, 51, x=30, y=18)
    for _ in range(20):
        t = aug.get_transform(img)
        out = t.apply_image(img)
        assert out.shape == img.shape
        point = t.apply_coords(np.array([[30.0, 18.0]]))[0]
        assert 2 <= point[0] <= 48 and 2 <= point[1] <= 38  # the mark stays inside
        np.testing.assert_allclose(_centroid(out), point, atol=1.0)


def test_rotation_by_steps_of_90_about_the_centre_is_exact():
    img = np.random.RandomState(0).rand(7, 7).astype(np.float32)
    mat = cv2.getRotationMatrix2D((3.0, 3.0), 90, 1.0)
    out = WarpAffineTransform(mat, (7, 7)).apply_image(img)
    np.testing.assert_allclose(out, np.rot90(img), atol=1e-6)


def test_affine_shear_keeps_the_centre_fixed():
    aug = Affine(shear=30, border=cv2.BORDER_CONSTANT)
    img = _marked(41, 61, x=30, y=20)
    for _ in range(5):
        t = aug.get_transform(img)
        np.testing.assert_allclose(t.apply_coords(np.array([[30.0, 20.0]])), [[30.0, 20.0]], atol=1e-4)
        np.testing.assert_allclose(_centroid(t.apply_image(img)), [30.0, 20.0], atol=0.05)


def test_affine_and_rotation_argument_errors():
    with pytest.raises(ValueError, match="scale must be a tuple of two floats"):
        Affine(scale=[0.5, 1.0])
    with pytest.raises(ValueError, match="shear"):
        Affine(shear=-1.0)
    with pytest.raises(ValueError, match="step_deg needs max_deg == 180"):
        Rotation(90, step_deg=45)
    with pytest.raises(ValueError, match="fractions must be in"):
        Shift(horiz_frac=1.0)


def test_largest_rotated_rect():
    assert RotationAndCropValid.largest_rotated_rect(100, 50, 0) == (100, 50)
    assert RotationAndCropValid.largest_rotated_rect(100, 100, 45) == (71, 71)
    assert RotationAndCropValid.largest_rotated_rect(100, 50, 90) == (50, 100)
    w, h = RotationAndCropValid.largest_rotated_rect(200, 100, 10)
    assert 150 < w < 200 and 60 < h < 100


def test_rotation_and_crop_valid_has_no_border():
    img = np.ones((60, 80, 3), np.uint8) * 200
    aug = RotationAndCropValid(30)
    shapes = set()
    for _ in range(10):
        out = aug.augment(img)
        shapes.add(out.shape)
        assert out.shape[0] <= 60 and out.shape[1] <= 80 and out.shape[2] == 3
        assert out[1:-1, 1:-1].min() == 200  # the zero border would show inside the crop
    assert len(shapes) > 1


def test_augmentor_list_coords_follow_a_pipeline():
    img = _marked(40, 60, x=30, y=20)
    augs = AugmentorList(
        [Flip(horiz=True, prob=1.0), Resize((80, 120), cv2.INTER_NEAREST), RandomCrop((70, 100))]
    )
    t = augs.get_transform(img)
    out = t.apply_image(img)
    point = t.apply_coords(np.array([[30.5, 20.5]]))[0]  # the centre of pixel (30, 20), in edge units
    np.testing.assert_allclose(_centroid(out) + 0.5, point, atol=1e-4)
