"""Colour jitter in one pass: the fused path against the step-by-step (EXACT) path and an independent
float64 computation of the reference's formulas, where the reference's clipping cannot trigger and
where it does."""

from __future__ import annotations

import contextlib
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from towerpack.dataflow import AugmentImageComponent, AugmentImageComponents, DataFromList, set_seed
from towerpack.dataflow.image.fbresnet import fbresnet_augmentor
from towerpack.dataflow.imgaug import AugmentorList, CenterCrop, Flip, RandomOrderAug
from towerpack.dataflow.imgaug.colour_matrix import (
    COLOUR_PATH_VAR,
    ColourPath,
    colour_path,
    set_colour_path,
)
from towerpack.dataflow.imgaug.convert import ToFloat32, ToUint8
from towerpack.dataflow.imgaug.imgproc import Brightness, BrightnessScale, Contrast, Lighting, Saturation

EIGVAL = (np.array([0.2175, 0.0188, 0.0045])[::-1] * 255).astype(np.float32)
EIGVEC = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140], [-0.5836, -0.6948, 0.4203]])[
    ::-1, ::-1
].astype(np.float32)
GREY = {True: np.array([0.299, 0.587, 0.114]), False: np.array([0.114, 0.587, 0.299])}  # RGB / BGR order
#: Pixels whose exact value lies this close to an integer may truncate either way (float32 rounding).
BAND = 1e-3


@contextlib.contextmanager
def colour(path: ColourPath):
    old = os.environ.get(COLOUR_PATH_VAR)
    set_colour_path(path)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(COLOUR_PATH_VAR, None)
        else:
            os.environ[COLOUR_PATH_VAR] = old


def run(augs: list, img: np.ndarray, seeds: list[int], path: ColourPath) -> np.ndarray:
    """``AugmentorList(augs).augment(img)`` with every augmentor's generator seeded from ``seeds``."""
    for aug, seed in zip(augs, seeds, strict=True):
        aug.rng = np.random.RandomState(seed)
    with colour(path):
        return AugmentorList(augs).augment(img)


def make(kind: str, rgb: bool | None):
    return {
        "brightness": lambda: Brightness(25),
        "scale": lambda: BrightnessScale((0.7, 1.3)),
        "contrast": lambda: Contrast((0.6, 1.4), rgb=rgb),
        "saturation": lambda: Saturation(0.4, rgb=bool(rgb)),
        "lighting": lambda: Lighting(0.1, EIGVAL, EIGVEC),
    }[kind]()


def exact_values(img: np.ndarray, augs: list, seeds: list[int]) -> tuple[np.ndarray, bool]:
    """The reference's formulas in float64 without clipping, and whether a clip would have triggered."""
    x = img.astype(np.float64)
    clipped = False
    for aug, seed in zip(augs, seeds, strict=True):
        aug.rng = np.random.RandomState(seed)
        p = aug._get_augment_params(img)  # the draw get_transform makes, from the same seed
        if isinstance(aug, Brightness):
            x = x + float(p)
        elif isinstance(aug, BrightnessScale):
            x = x * float(p)
        elif isinstance(aug, Contrast):
            mean = x.mean(axis=(0, 1))
            if aug.rgb is not None:
                mean = np.full(3, GREY[aug.rgb] @ mean)
            x = x * float(p) + mean * (1 - float(p))
        elif isinstance(aug, Saturation):
            grey = x @ GREY[aug.rgb]
            x = x * float(p) + grey[..., None] * (1 - float(p))
        elif isinstance(aug, Lighting):
            x = x + (EIGVEC @ (np.asarray(p, np.float32) * EIGVAL)).astype(np.float64)
        clipped |= bool((x < 0).any() or (x > 255).any())
    return x, clipped


KINDS = ["brightness", "scale", "contrast", "saturation", "lighting"]


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.filter_too_much],
)
@given(
    img=hnp.arrays(
        np.uint8, st.tuples(st.integers(1, 9), st.integers(1, 9), st.just(3)), elements=st.integers(60, 190)
    ),
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=5),
    rgb=st.sampled_from([None, True, False]),
    seed=st.integers(0, 2**31),
    to_uint8=st.booleans(),
)
def test_one_pass_equals_step_by_step_where_no_clip_triggers(img, kinds, rgb, seed, to_uint8):
    augs = [make(k, rgb) for k in kinds]
    seeds = [seed + i for i in range(len(augs))]
    values, clipped = exact_values(img, augs, seeds)
    assume(not clipped)
    chain = [ToFloat32(), *augs, *([ToUint8()] if to_uint8 else [])]
    chain_seeds = [0, *seeds, *([0] if to_uint8 else [])]
    fused = run(chain, img, chain_seeds, ColourPath.FUSED)
    exact = run(chain, img, chain_seeds, ColourPath.EXACT)
    assert fused.dtype == exact.dtype == (np.uint8 if to_uint8 else np.float32)
    if not to_uint8:
        np.testing.assert_allclose(fused, exact, atol=BAND)
        np.testing.assert_allclose(fused, values, atol=BAND)
        return
    boundary = np.abs(values - np.round(values)) < BAND
    truth = np.floor(values)
    np.testing.assert_array_equal(fused[~boundary], truth[~boundary])
    np.testing.assert_array_equal(exact[~boundary], truth[~boundary])
    assert np.abs(fused[boundary].astype(int) - exact[boundary]).max(initial=0) <= 1


def test_an_intermediate_clip_is_where_the_paths_differ():
    img = np.array([[[250, 100, 20]]], np.uint8)
    chain = [ToFloat32(), BrightnessScale((1.4, 1.4)), BrightnessScale((0.5, 0.5)), ToUint8()]
    exact = run(chain, img, [0] * 4, ColourPath.EXACT)
    fused = run(chain, img, [0] * 4, ColourPath.FUSED)
    # Step by step, 250 * 1.4 is clipped to 255 before it is halved; in one pass it is not.
    assert exact.ravel().tolist() == [127, 70, 14]
    assert fused.ravel().tolist() == [175, 70, 14]


def test_uint8_runs_truncate_at_every_step_on_either_path():
    # No ToFloat32 (the reference's CIFAR example): every augmentor rounds to uint8, so no fusion.
    img = np.random.default_rng(0).integers(0, 256, (12, 10, 3), dtype=np.uint8)
    for seed in range(10):
        chain = [Brightness(63), Contrast((0.2, 1.8)), Saturation(0.4)]
        fused = run(chain, img, [seed, seed + 1, seed + 2], ColourPath.FUSED)
        exact = run(chain, img, [seed, seed + 1, seed + 2], ColourPath.EXACT)
        np.testing.assert_array_equal(fused, exact)


def _low_contrast_photo(h: int = 64, w: int = 80) -> np.ndarray:
    # Values in [110, 130]: the fbresnet jitter cannot push them out of [0, 255].
    return np.random.default_rng(3).integers(110, 131, (h, w, 3), dtype=np.uint8)


def _dataflow_output(df_class, augs: list, dp: list, path: ColourPath, seed: int, **kw) -> list:
    """The first datapoint of ``df_class(DataFromList([dp]), augs)``, augmentors seeded from ``seed``."""
    set_seed(seed)
    try:
        df = df_class(DataFromList([dp], shuffle=False), augs, **kw)
        df.reset_state()  # seeds the augmentors from (seed, their creation order): the same on both paths
        with colour(path):
            return next(iter(df))
    finally:
        set_seed(None)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_fbresnet_list_in_a_dataflow_matches_the_exact_path(seed):
    img = _low_contrast_photo()
    augs = fbresnet_augmentor(True)
    (fused,) = _dataflow_output(AugmentImageComponent, augs, [img], ColourPath.FUSED, seed)
    (exact,) = _dataflow_output(AugmentImageComponent, augs, [img], ColourPath.EXACT, seed)
    assert fused.shape == exact.shape == (224, 224, 3)
    diff = np.abs(fused.astype(int) - exact)
    assert diff.max() <= 1 and (diff > 0).mean() < 0.005


def test_masks_get_the_same_draws_and_their_own_means():
    rng = np.random.default_rng(5)
    img = rng.integers(100, 141, (30, 40, 3), dtype=np.uint8)
    other = rng.integers(60, 91, (30, 40, 3), dtype=np.uint8)
    augs = [
        ToFloat32(),
        RandomOrderAug([Contrast((0.6, 1.4), rgb=False), Saturation(0.4, rgb=False)]),
        ToUint8(),
    ]
    fused, exact = (
        _dataflow_output(AugmentImageComponents, augs, [img, other], path, 7, index=(0, 1))
        for path in (ColourPath.FUSED, ColourPath.EXACT)
    )
    for a, b in zip(fused, exact, strict=True):
        diff = np.abs(a.astype(int) - b)
        assert diff.max() <= 1 and (diff > 0).mean() < 0.01
    assert abs(float(fused[0].mean()) - float(fused[1].mean())) > 20  # each kept its own mean


def test_a_subclass_that_changes_the_step_is_applied_step_by_step():
    class Inverted(BrightnessScale):
        def _augment(self, img, v):
            return 255 - img

    img = np.full((4, 4, 3), 50, np.uint8)
    out = run([ToFloat32(), Inverted((2.0, 2.0)), ToUint8()], img, [0] * 3, ColourPath.FUSED)
    assert np.all(out == 205)  # not 100, as a BrightnessScale(2) would give


def test_coordinates_follow_after_a_fused_apply_image():
    augs = AugmentorList(
        [
            CenterCrop(20),
            ToFloat32(),
            Brightness(10),
            Contrast((0.8, 1.2)),
            ToUint8(),
            Flip(horiz=True, prob=1.0),
        ]
    )
    img = np.full((30, 40, 3), 90, np.uint8)
    with colour(ColourPath.FUSED):
        tfm = augs.get_transform(img)
        out = tfm.apply_image(img)
    assert out.shape == (20, 20, 3)
    points = tfm.apply_coords(np.array([[10.0, 5.0]], np.float32))
    np.testing.assert_allclose(points, [[20 - 0.0, 0.0]])


def test_the_colour_path_setting():
    old = os.environ.get(COLOUR_PATH_VAR)
    try:
        os.environ.pop(COLOUR_PATH_VAR, None)
        assert colour_path() is ColourPath.FUSED
        assert set_colour_path("exact") is ColourPath.FUSED
        assert os.environ[COLOUR_PATH_VAR] == "exact" and colour_path() is ColourPath.EXACT
        os.environ[COLOUR_PATH_VAR] = "fast"
        with pytest.raises(
            ValueError, match=f"{COLOUR_PATH_VAR}: the colour path must be one of 'fused', 'exact'"
        ):
            colour_path()
        os.environ[COLOUR_PATH_VAR] = "exact"
        with pytest.raises(ValueError, match="got 'sometimes'"):
            set_colour_path("sometimes")
        assert colour_path() is ColourPath.EXACT  # unchanged
    finally:
        if old is None:
            os.environ.pop(COLOUR_PATH_VAR, None)
        else:
            os.environ[COLOUR_PATH_VAR] = old


def test_one_pass_keeps_grey_and_non_uint8_images_on_the_step_by_step_path():
    grey = np.full((6, 6, 1), 100, np.uint8)
    chain = [ToFloat32(), BrightnessScale((1.5, 1.5)), Contrast((0.5, 0.5), rgb=None), ToUint8()]
    np.testing.assert_array_equal(
        run(chain, grey, [0] * 4, ColourPath.FUSED), run(chain, grey, [0] * 4, ColourPath.EXACT)
    )
    wide = np.full((6, 6, 3), 100.0, np.float64)
    chain = [BrightnessScale((1.5, 1.5)), Brightness(3)]
    np.testing.assert_array_equal(
        run(chain, wide, [0, 1], ColourPath.FUSED), run(chain, wide, [0, 1], ColourPath.EXACT)
    )
