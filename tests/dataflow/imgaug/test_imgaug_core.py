"""The augmentor and transform contracts: lists, laziness, meta augmentors, repr, the legacy API, errors."""

from __future__ import annotations

import logging
import sys

import cv2
import numpy as np
import pytest

from towerpack.dataflow.imgaug import base
from towerpack.dataflow.imgaug.base import (
    Augmentor,
    AugmentorList,
    ImageAugmentor,
    PhotometricAugmentor,
    TransformAugmentorBase,
    check_dtype,
)
from towerpack.dataflow.imgaug.crop import GoogleNetRandomCropAndResize, RandomCrop
from towerpack.dataflow.imgaug.deform import GaussianDeform
from towerpack.dataflow.imgaug.external import Albumentations, IAAugmentor
from towerpack.dataflow.imgaug.meta import Identity, MapImage, RandomApplyAug, RandomChooseAug, RandomOrderAug
from towerpack.dataflow.imgaug.misc import Flip, Resize
from towerpack.dataflow.imgaug.transform import (
    CropTransform,
    LazyTransform,
    NoOpTransform,
    PhotometricTransform,
    Transform,
    TransformFactory,
    TransformList,
)


class AddValue(PhotometricAugmentor):
    """Adds a random value in [0, high)."""

    def __init__(self, high=10.0):
        super().__init__()
        self._init(locals())

    def _get_augment_params(self, img):
        return float(self._rand_range(self.high))

    def _augment(self, img, value):
        return img + value


class LegacyShift(ImageAugmentor):
    """The pre-2020 subclass API: parameters, pixels and coordinates through underscored hooks."""

    def __init__(self):
        super().__init__()

    def _get_augment_params(self, img):
        return int(self.rng.randint(1, 4))

    def _augment(self, img, k):
        return np.roll(img, k, axis=1)

    def _augment_coords(self, coords, k):
        coords[:, 0] += k
        return coords


class NoSuperInit(ImageAugmentor):
    def __init__(self, prob):
        self.prob = prob

    def get_transform(self, img):
        return NoOpTransform() if self.rng.rand() < self.prob else CropTransform(0, 0, 1, 1)


def test_augmentor_list_draws_later_params_from_the_intermediate_image():
    img = np.zeros((20, 20), np.float32)
    augs = AugmentorList([Resize((40, 40)), RandomCrop(35)])  # 35 does not fit the 20x20 input
    t = augs.get_transform(img)
    assert isinstance(t.tfms[1], LazyTransform)
    with pytest.raises(AssertionError, match="before apply_image"):
        t.apply_coords(np.zeros((1, 2), np.float32))
    out = t.apply_image(img)
    assert out.shape == (35, 35)
    crop = t.tfms[1]._transform
    marked = np.arange(400, dtype=np.float32).reshape(20, 20)
    again = t.apply_image(marked)  # frozen: the same crop for another image
    expected = cv2.resize(marked, (40, 40))[crop.y0 : crop.y0 + 35, crop.x0 : crop.x0 + 35]
    np.testing.assert_array_equal(again, expected)
    np.testing.assert_allclose(t.apply_coords(np.array([[10.0, 10.0]])), [[20.0 - crop.x0, 20.0 - crop.y0]])


def test_augmentor_list_flattens_nested_lists_and_checks_input():
    augs = AugmentorList([GoogleNetRandomCropAndResize(target_shape=8), AugmentorList([Flip(horiz=True)])])
    t = augs.get_transform(np.zeros((30, 30, 3), np.uint8))
    assert isinstance(t, TransformList) and len(t.tfms) == 3  # crop, resize, the lazy inner list
    assert t.apply_image(np.zeros((30, 30, 3), np.uint8)).shape == (8, 8, 3)
    with pytest.raises(ValueError, match=r"HxW or HxWxC, got shape \(2, 2, 2, 2\)"):
        augs.get_transform(np.zeros((2, 2, 2, 2), np.uint8))
    with pytest.raises(TypeError, match="list or tuple"):
        AugmentorList(Flip(horiz=True))
    with pytest.raises(TypeError, match="takes augmentors, got function"):
        AugmentorList([lambda x: x])
    assert AugmentorList([]).augment(np.ones((2, 2), np.uint8)).sum() == 4


def test_check_dtype_rejects_wide_integers():
    check_dtype(np.zeros((2, 2), np.uint8))
    check_dtype(np.zeros((2, 2), np.float64))
    with pytest.raises(TypeError, match="uint8 or floating point image, got dtype int32"):
        Flip(horiz=True).augment(np.zeros((2, 2), np.int32))
    with pytest.raises(TypeError, match="numpy array image, got list"):
        Flip(horiz=True).augment([[1, 2]])


def test_photometric_augmentor_keeps_coords_and_draws_once():
    aug = AddValue()
    t = aug.get_transform(np.zeros((2, 2), np.float32))
    assert isinstance(t, PhotometricTransform)
    a = t.apply_image(np.zeros((2, 2), np.float32))
    b = t.apply_image(np.zeros((2, 2), np.float32))
    np.testing.assert_array_equal(a, b)
    assert 0 <= a[0, 0] < 10
    coords = np.array([[1.0, 2.0]])
    assert t.apply_coords(coords) is coords


def test_legacy_subclass_api_goes_through_a_factory(monkeypatch, caplog):
    monkeypatch.setattr(base, "_warn_counts", {})
    aug = LegacyShift()
    img = np.arange(12, dtype=np.float32).reshape(3, 4)
    with caplog.at_level(logging.WARNING):
        t = aug.get_transform(img)
        aug.get_transform(img)
    assert isinstance(t, TransformFactory)
    k = int(t.apply_coords(np.zeros((1, 2), np.float32))[0, 0])
    np.testing.assert_array_equal(t.apply_image(img), np.roll(img, k, axis=1))
    assert sum("LegacyShift" in r.getMessage() for r in caplog.records) == 1


def test_legacy_params_that_are_a_transform_are_returned_as_is():
    class Legacy(ImageAugmentor):
        def _get_augment_params(self, img):
            return CropTransform(0, 0, 1, 1)

        def _augment(self, img, params):
            raise AssertionError("not called")

    t = Legacy().get_transform(np.zeros((3, 3), np.uint8))
    assert isinstance(t, CropTransform)


def test_an_augmentor_without_get_transform_says_what_to_implement():
    with pytest.raises(NotImplementedError, match="must implement get_transform"):
        ImageAugmentor().augment(np.zeros((2, 2), np.uint8))


def test_deprecated_wrappers_work_and_warn_a_few_times(monkeypatch, caplog):
    monkeypatch.setattr(base, "_warn_counts", {})
    aug = Flip(horiz=True, prob=1.0)
    img = np.arange(6, dtype=np.float32).reshape(2, 3)
    with caplog.at_level(logging.WARNING, logger="towerpack.dataflow.imgaug.base"):
        for _ in range(5):
            out, t = aug.augment_return_params(img)
            np.testing.assert_array_equal(aug.augment_with_params(img, t), out)
            np.testing.assert_allclose(aug.augment_coords(np.array([[0.0, 0.0]]), t), [[3.0, 0.0]])
    messages = [r.getMessage() for r in caplog.records]
    for name in ("augment_return_params", "augment_with_params", "augment_coords"):
        assert sum(m.startswith(name + " is deprecated") for m in messages) == 3


def test_aliases():
    assert Augmentor is ImageAugmentor and TransformAugmentorBase is ImageAugmentor


def test_rand_range():
    aug = AddValue()
    one = aug._rand_range(2.0)
    assert isinstance(one, np.ndarray) and one.shape == () and one.dtype == np.float32
    values = aug._rand_range(3.0, 5.0, size=(100,))
    assert values.dtype == np.float32 and values.min() >= 3.0 and values.max() < 5.0


def test_subclass_without_super_init_gets_an_rng():
    aug = NoSuperInit(prob=1.0)
    assert isinstance(aug.get_transform(None), NoOpTransform)
    aug.reset_state()
    assert isinstance(aug.rng, np.random.RandomState)


def test_repr():
    assert repr(Flip(horiz=True)) == "imgaug.Flip(horiz=True)"
    assert repr(Flip(vert=True, prob=0.2)) == "imgaug.Flip(vert=True, prob=0.2)"
    assert repr(RandomCrop(4)) == "imgaug.RandomCrop(crop_shape=(4, 4))"
    assert repr(AugmentorList([Identity(), Resize(3)])) == (
        "imgaug.AugmentorList([\n  imgaug.Identity(),\n  imgaug.Resize(shape=(3, 3))])"
    )
    assert repr(CropTransform(1, 2, 3, 4)) == "imgaug.CropTransform(y0=1, x0=2, h=3, w=4)"
    t = AugmentorList([Identity(), Resize(3)]).get_transform(np.zeros((5, 5), np.uint8))
    assert "LazyTransform" in repr(t)
    t.apply_image(np.zeros((5, 5), np.uint8))
    assert "imgaug.ResizeTransform(h=5, w=5, new_h=3, new_w=3, interp=1)" in repr(t)


def test_repr_falls_back_for_star_args(caplog):
    class Star(ImageAugmentor):
        def __init__(self, *sizes):
            super().__init__()

    with caplog.at_level(logging.WARNING):
        text = repr(Star(1, 2))
        repr(Star())
    assert text.startswith("<") and "Star object at" in text
    assert sum("Star cannot show its arguments" in r.getMessage() for r in caplog.records) == 1


def test_transform_missing_apply_raises_not_implemented():
    class OnlyImage(Transform):
        def apply_image(self, img):
            return img

    t = OnlyImage()
    with pytest.raises(NotImplementedError, match="OnlyImage does not implement apply_coords"):
        t.apply_coords(np.zeros((1, 2)))
    with pytest.raises(AttributeError):
        t.something_else  # noqa: B018
    factory = TransformFactory(name="f", apply_image=lambda x: x + 1)
    assert factory.apply_image(1) == 2
    with pytest.raises(NotImplementedError):
        factory.apply_coords(np.zeros((1, 2)))
    with pytest.raises(KeyError, match="apply_<kind>"):
        TransformFactory(image=lambda x: x)
    assert NoOpTransform().apply_segmentation("x") == "x"


def test_transform_list_arithmetic_and_custom_kinds():
    a, b = TransformFactory(apply_mask=lambda m: m + 1), TransformFactory(apply_mask=lambda m: m * 10)
    tl = TransformList([a])
    assert (tl + b).apply_mask(1) == 20
    assert (b + tl).apply_mask(1) == 11
    tl += TransformList([b, a])
    assert len(tl.tfms) == 3 and tl.apply_mask(1) == 21
    with pytest.raises(TypeError, match="TransformList takes transforms, got int"):
        TransformList([a, 3])


def test_random_apply_aug():
    img = np.arange(6, dtype=np.uint8).reshape(2, 3)
    assert isinstance(RandomApplyAug(Flip(horiz=True, prob=1.0), 0.0).get_transform(img), NoOpTransform)
    np.testing.assert_array_equal(RandomApplyAug(Flip(horiz=True, prob=1.0), 1.0).augment(img), img[:, ::-1])
    aug = RandomApplyAug(Flip(horiz=True, prob=1.0), 0.25)
    applied = sum(not isinstance(aug.get_transform(img), NoOpTransform) for _ in range(2000))
    assert 400 < applied < 600


def test_random_choose_aug_probabilities():
    one, two = MapImage(lambda x: x + 1), MapImage(lambda x: x + 2)
    aug = RandomChooseAug([(one, 0.8), (two, 0.2)])
    picks = np.array([aug.augment(np.zeros(1, np.float32))[0] for _ in range(2000)])
    assert set(np.unique(picks)) == {1.0, 2.0}
    assert 0.75 < np.mean(picks == 1.0) < 0.85
    uniform = RandomChooseAug([one, two])
    picks = np.array([uniform.augment(np.zeros(1, np.float32))[0] for _ in range(2000)])
    assert 0.45 < np.mean(picks == 1.0) < 0.55
    with pytest.raises(ValueError, match="sum to 1"):
        RandomChooseAug([(one, 0.5), (two, 0.2)])


def test_random_order_aug_permutes():
    double, inc = MapImage(lambda x: x * 2), MapImage(lambda x: x + 1)
    aug = RandomOrderAug([double, inc])
    results = [aug.augment(np.ones(1, np.float32))[0] for _ in range(1000)]
    assert set(results) == {3.0, 4.0}  # double then inc, or inc then double
    assert 400 < results.count(3.0) < 600


def test_random_order_aug_draws_every_child_from_the_input():
    seen = []

    class Record(ImageAugmentor):
        def get_transform(self, img):
            seen.append(img.copy())
            return TransformFactory(apply_image=lambda x: x + 1)

    out = RandomOrderAug([Record(), Record(), Record()]).augment(np.zeros(2, np.float32))
    np.testing.assert_array_equal(out, [3.0, 3.0])
    assert len(seen) == 3 and all((s == 0).all() for s in seen)


def test_map_image_coords():
    aug = MapImage(lambda x: x[::-1], lambda c: c + 1)
    t = aug.get_transform(np.zeros((2, 2)))
    np.testing.assert_array_equal(t.apply_coords(np.zeros((1, 2))), [[1.0, 1.0]])
    with pytest.raises(NotImplementedError):
        MapImage(lambda x: x).get_transform(None).apply_coords(np.zeros((1, 2)))


def test_meta_augmentors_reset_their_children():
    child = Flip(horiz=True)
    parents = [
        RandomApplyAug(child, 0.5),
        RandomChooseAug([child]),
        RandomOrderAug([child]),
        AugmentorList([child]),
    ]
    for parent in parents:
        before = child.rng
        parent.reset_state()
        assert child.rng is not before


def test_gaussian_deform_without_movement_is_identity():
    img = np.arange(20 * 25 * 2, dtype=np.uint8).reshape(20, 25, 2)
    aug = GaussianDeform([(0.2, 0.2), (0.7, 0.5)], (20, 25), randrange=0)
    out = aug.augment(img)
    assert out.dtype == np.float32 and out.shape == img.shape
    np.testing.assert_array_equal(out, img)
    moved = GaussianDeform([(0.5, 0.5)], (20, 25), randrange=3).augment(img)
    assert not np.array_equal(moved, img)
    with pytest.raises(ValueError, match=r"made for 20x25 images"):
        aug.augment(np.zeros((5, 5), np.uint8))


@pytest.mark.parametrize(("cls", "package"), [(IAAugmentor, "imgaug"), (Albumentations, "albumentations")])
def test_external_adapters_name_the_missing_package(monkeypatch, cls, package):
    monkeypatch.setitem(sys.modules, package, None)  # makes the import fail even where it is installed
    with pytest.raises(ImportError, match=f"needs the '{package}' package: pip install {package}"):
        cls(object())
