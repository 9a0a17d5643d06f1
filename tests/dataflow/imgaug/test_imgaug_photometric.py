"""Photometric, conversion and noise augmentors: pixel values against independently computed formulas,
parameter draws against the reference's draws from the same seed, and the dtype/shape/clip rules."""

from __future__ import annotations

import subprocess
import sys

import cv2
import numpy as np
import pytest

from support.image_datasets import synthetic_photo
from towerpack.dataflow.imgaug.convert import ColorSpace, Grayscale, ToFloat32, ToUint8
from towerpack.dataflow.imgaug.imgproc import (
    Brightness,
    BrightnessScale,
    Clip,
    Contrast,
    Gamma,
    GaussianBlur,
    Hue,
    Lighting,
    MeanVarianceNormalize,
    MinMaxNormalize,
    Saturation,
)
from towerpack.dataflow.imgaug.noise import GaussianNoise, JpegNoise, SaltPepperNoise

# The ImageNet recipe's PCA constants (fb.resnet.torch), reversed for BGR as the recipe does.
EIGVAL = np.array([0.2175, 0.0188, 0.0045])[::-1] * 255
EIGVEC = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140], [-0.5836, -0.6948, 0.4203]])[
    ::-1, ::-1
]
# cv2's grey weights for B, G, R.
GREY_BGR = np.array([0.114, 0.587, 0.299])


def photo(h: int = 40, w: int = 56, seed: int = 0) -> np.ndarray:
    return synthetic_photo(np.random.default_rng(seed), h, w)


def apply(aug, img: np.ndarray, seed: int = 1) -> np.ndarray:
    """Draw with ``aug.rng`` seeded to ``seed`` and apply, through the public transform API."""
    aug.rng = np.random.RandomState(seed)
    return aug.get_transform(img).apply_image(img)


def seeded(seed: int = 1) -> np.random.RandomState:
    return np.random.RandomState(seed)


# ---- brightness -------------------------------------------------------------------------------


def test_brightness_adds_then_clips_and_truncates_uint8():
    img = np.array([[0, 100, 250]], np.uint8)
    assert Brightness(30)._augment(img, np.float32(10.5)).tolist() == [[10, 110, 255]]
    assert Brightness(30)._augment(img, np.float32(-10.5)).tolist() == [[0, 89, 239]]
    # uint8 is clipped even with clip=False: it has to fit the dtype
    assert Brightness(30, clip=False)._augment(img, np.float32(10.5)).tolist() == [[10, 110, 255]]


def test_brightness_float_clip_rule():
    img = np.array([[0.0, 100.0, 250.0]], np.float32)
    assert Brightness(30)._augment(img, np.float32(10.5)).tolist() == [[10.5, 110.5, 255.0]]
    out = Brightness(30, clip=False)._augment(img, np.float32(-10.5))
    assert out.dtype == np.float32
    assert out.tolist() == [[-10.5, 89.5, 239.5]]


def test_brightness_draw_matches_reference_stream():
    img = photo()
    v = np.float32(seeded(5).uniform(-40, 40))
    expected = np.clip(img.astype(np.float64) + v, 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(apply(Brightness(40), img, seed=5), expected)


def test_brightness_scale_multiplies():
    img = np.array([[0, 3, 101, 200]], np.uint8)
    assert BrightnessScale((0.5, 2))._augment(img, np.float32(1.5)).tolist() == [[0, 4, 151, 255]]
    f = img.astype(np.float32)
    assert BrightnessScale((0.5, 2), clip=False)._augment(f, np.float32(1.5)).tolist() == [
        [0, 4.5, 151.5, 300]
    ]
    img = photo().astype(np.float32)
    v = np.float32(seeded(3).uniform(0.6, 1.4))
    out = apply(BrightnessScale((0.6, 1.4), clip=False), img, seed=3)
    np.testing.assert_array_equal(out, (img.astype(np.float64) * v).astype(np.float32))


# ---- contrast ---------------------------------------------------------------------------------


def test_contrast_grey_image_pulls_towards_its_mean():
    img = np.array([[0, 100], [200, 100]], np.uint8)  # mean 100
    aug = Contrast((0.5, 2))
    assert aug._augment(img, np.float32(0.5)).tolist() == [[50, 100], [150, 100]]
    assert aug._augment(img, np.float32(2.0)).tolist() == [[0, 100], [255, 100]]
    out = Contrast((0.5, 2), clip=False)._augment(img.astype(np.float32), np.float32(2.0))
    assert out.tolist() == [[-100, 100], [300, 100]]


def test_contrast_per_channel_mean_when_rgb_is_none():
    img = np.zeros((2, 2, 3), np.float32)
    img[..., 0] = [[0, 20], [20, 40]]  # mean 20
    img[..., 1] = [[100, 100], [200, 200]]  # mean 150
    img[..., 2] = 7  # constant
    out = Contrast((0.5, 2))._augment(img, np.float32(0.5))
    np.testing.assert_array_equal(out[..., 0], [[10, 20], [20, 30]])
    np.testing.assert_array_equal(out[..., 1], [[125, 125], [175, 175]])
    np.testing.assert_array_equal(out[..., 2], 7)


@pytest.mark.parametrize("rgb", [False, True])
def test_contrast_uses_grey_mean_with_rgb_set(rgb):
    img = photo().astype(np.float32)
    weights = GREY_BGR if not rgb else GREY_BGR[::-1]
    grey_mean = (img.astype(np.float64) * weights).sum(axis=2).mean()
    r = np.float32(seeded(9).uniform(0.6, 1.4))
    out = apply(Contrast((0.6, 1.4), rgb=rgb, clip=False), img, seed=9)
    expected = img.astype(np.float64) * r + grey_mean * (1 - r)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=2e-3)
    assert out.dtype == np.float32
    # one offset for all channels: BGR and RGB means differ on a colour photo, so the results do too
    other = apply(Contrast((0.6, 1.4), rgb=not rgb, clip=False), img, seed=9)
    assert np.abs(other - out).max() > 0.01


def test_contrast_uint8_per_channel_matches_float32_formula():
    img = photo()
    r = np.float32(seeded(2).uniform(0.2, 1.8))
    means = img.reshape(-1, 3).astype(np.float64).mean(axis=0)
    expected = img.astype(np.float32) * r + (means * (1 - r)).astype(np.float32)
    expected = np.clip(expected, 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(apply(Contrast((0.2, 1.8)), img, seed=2), expected)


def test_per_channel_arithmetic_on_non_contiguous_views():
    base = photo(30, 30).astype(np.float32)
    for view in (base.swapaxes(0, 1), base[:, ::-1], base[::2, 1::3]):
        dense = np.ascontiguousarray(view)
        for aug in (Contrast((0.5, 1.5), clip=False), Lighting(0.1, EIGVAL, EIGVEC, clip=False)):
            np.testing.assert_array_equal(apply(aug, view, seed=3), apply(aug, dense, seed=3))


def test_contrast_on_single_channel_image_with_rgb_uses_its_mean():
    img = np.array([[[0], [100]], [[200], [100]]], np.uint8)
    assert Contrast((0.5, 2), rgb=False)._augment(img, np.float32(0.5)).tolist() == [
        [[50], [100]],
        [[150], [100]],
    ]


# ---- saturation, hue, lighting ------------------------------------------------------------------


@pytest.mark.parametrize("rgb", [False, True])
def test_saturation_blends_with_grey(rgb):
    img = photo().astype(np.float32)
    weights = GREY_BGR if not rgb else GREY_BGR[::-1]
    grey = (img.astype(np.float64) * weights).sum(axis=2, keepdims=True)
    v = 1 + np.float32(seeded(4).uniform(-0.4, 0.4))
    out = apply(Saturation(0.4, rgb=rgb, clip=False), img, seed=4)
    np.testing.assert_allclose(out, img * v + grey * (1 - v), rtol=1e-5, atol=2e-3)


def test_saturation_uint8_clips_and_grey_pixels_stay():
    img = np.array([[[10, 20, 250], [90, 90, 90]]], np.uint8)
    out = Saturation(0.9, rgb=False)._augment(img, np.float32(1.5))
    grey = int(cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)[0, 0])
    expected = np.clip(np.array([10, 20, 250]) * 1.5 + grey * -0.5, 0, 255).astype(np.uint8)
    assert out[0, 0].tolist() == expected.tolist()
    assert out[0, 0, 2] == 255
    assert abs(int(out[0, 1, 0]) - 90) <= 1  # a grey pixel has no saturation to change
    zero = Saturation(0.9, rgb=False)._augment(img, np.float32(0.0))  # v = 0: fully grey
    assert (zero[0, 0] == grey).all()


def test_hue_rotates_colours():
    red_bgr = np.zeros((2, 3, 3), np.uint8)
    red_bgr[..., 2] = 255
    # OpenCV hue units are half degrees: +60 turns red into green, -30 into magenta
    assert Hue(rgb=False)._augment(red_bgr, np.float32(60))[0, 0].tolist() == [0, 255, 0]
    assert Hue(rgb=False)._augment(red_bgr, np.float32(-30))[0, 0].tolist() == [255, 0, 255]
    red_rgb = red_bgr[..., ::-1].copy()
    assert Hue(rgb=True)._augment(red_rgb, np.float32(60))[0, 0].tolist() == [0, 255, 0]
    out = Hue(rgb=False)._augment(red_bgr.astype(np.float32) / 255, np.float32(60))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out[0, 0], [0, 1, 0], atol=1e-6)


def test_hue_needs_colour_uint8_or_float32():
    with pytest.raises(ValueError, match=r"Hue needs .*3 channel.*\(4, 4\)"):
        Hue().augment(np.zeros((4, 4), np.uint8))
    with pytest.raises(TypeError, match="Hue needs a uint8 or float32 image, got dtype float64"):
        Hue().augment(np.zeros((4, 4, 3), np.float64))


def test_lighting_adds_one_pca_vector_to_every_pixel():
    img = photo().astype(np.float32)
    a = seeded(11).randn(3) * 0.1
    shift = EIGVEC @ (a * EIGVAL)
    out = apply(Lighting(0.1, EIGVAL, EIGVEC, clip=False), img, seed=11)
    np.testing.assert_allclose(out, img + shift, rtol=1e-6, atol=1e-3)
    np.testing.assert_allclose(
        (out - img).reshape(-1, 3), np.tile(shift, (img.shape[0] * img.shape[1], 1)), atol=1e-3
    )
    clipped = apply(Lighting(0.1, EIGVAL, EIGVEC), img + 250, seed=11)
    assert clipped.max() <= 255 and clipped.dtype == np.float32
    u8 = apply(Lighting(0.1, EIGVAL, EIGVEC), photo(), seed=11)
    expected = np.clip(photo() + shift, 0, 255).astype(np.uint8)
    assert np.abs(u8.astype(int) - expected).max() <= 1 and (u8 == expected).mean() > 0.999


def test_lighting_checks_its_constants_and_the_image():
    with pytest.raises(ValueError, match=r"eigval of shape \(3,\).*got \(2,\)"):
        Lighting(0.1, [1, 2], EIGVEC)
    with pytest.raises(ValueError, match=r"Lighting needs .*3 channel"):
        Lighting(0.1, EIGVAL, EIGVEC).augment(np.zeros((4, 4), np.float32))


# ---- normalisation, clip, gamma, blur ---------------------------------------------------------


@pytest.mark.parametrize("all_channel", [True, False])
def test_mean_variance_normalize(all_channel):
    img = photo()
    out = MeanVarianceNormalize(all_channel=all_channel).augment(img)
    x = img.astype(np.float64)
    axis = None if all_channel else (0, 1)
    expected = (x - x.mean(axis=axis, keepdims=True)) / x.std(axis=axis, keepdims=True)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


def test_mean_variance_normalize_constant_image_uses_the_std_floor():
    out = MeanVarianceNormalize().augment(np.full((4, 4, 3), 9, np.uint8))
    assert out.dtype == np.float32 and np.isfinite(out).all() and (out == 0).all()


def test_min_max_normalize_spans_the_range():
    img = np.array([[10, 20], [30, 50]], np.uint8)
    out = MinMaxNormalize(min=-1, max=1).augment(img)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[-1, -0.5], [0, 1]])
    img3 = photo()
    out3 = MinMaxNormalize(all_channel=False).augment(img3)
    np.testing.assert_allclose(out3.min(axis=(0, 1)), 0, atol=1e-4)
    np.testing.assert_allclose(out3.max(axis=(0, 1)), 255, atol=1e-3)


def test_min_max_normalize_constant_image_gives_min_not_nan():
    with np.errstate(all="raise"):
        out = MinMaxNormalize(min=3, max=7).augment(np.full((5, 5), 42, np.float32))
        assert (out == 3).all()
        img = photo()
        img[..., 1] = 17  # one constant channel
        per = MinMaxNormalize(all_channel=False).augment(img)
    assert (per[..., 1] == 0).all() and per[..., 0].max() == pytest.approx(255)


def test_clip_keeps_dtype():
    img = np.array([[-5.0, 3.0, 300.0]], np.float32)
    out = Clip(0, 10).augment(img)
    assert out.dtype == np.float32 and out.tolist() == [[0, 3, 10]]
    assert Clip(min=50, max=60).augment(np.array([[0, 55, 255]], np.uint8)).tolist() == [[50, 55, 60]]


def test_gamma_uint8_uses_the_truncated_lookup_table():
    img = np.arange(256, dtype=np.uint8).reshape(16, 16)
    g = np.float32(seeded(6).uniform(-0.5, 0.5))
    lut = ((np.arange(256, dtype=np.float32) / 255) ** np.float32(1 / (1 + float(g))) * 255).astype(np.uint8)
    out = apply(Gamma(), img, seed=6)
    np.testing.assert_array_equal(out, lut[img])
    exact = (np.arange(256) / 255.0) ** (1 / (1 + float(g))) * 255
    assert np.abs(out.ravel() - exact).max() < 1.0  # truncation only
    assert apply(Gamma(), img[:, :, None], seed=6).shape == (16, 16, 1)


def test_gamma_float_is_not_quantised():
    img = np.array([[-3.0, 0.0, 0.5, 63.75, 255.0, 300.0]], np.float32)
    out = Gamma()._augment(img, np.float32(1.0))  # exponent 1/2
    expected = np.sqrt(np.clip(img.astype(np.float64), 0, 255) / 255) * 255
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert out[0, 2] == pytest.approx(np.sqrt(0.5 / 255) * 255, rel=1e-6)  # not a whole number


def test_gamma_range_must_stay_above_minus_one():
    with pytest.raises(ValueError, match="Gamma needs range"):
        Gamma(range=(-1.0, 0.5))


def test_gaussian_blur_kernel_sizes():
    img = photo()
    aug = GaussianBlur()
    aug.rng = seeded(0)
    sizes = {aug._get_augment_params(img)[0] for _ in range(200)}
    assert sizes == {(1, 1), (3, 3), (5, 5)}  # symmetric, 2k+1 for k in [0, 3)
    free = GaussianBlur(size_range=(1, 4), symmetric=False)
    free.rng = seeded(0)
    draws = [free._get_augment_params(img)[0] for _ in range(200)]
    assert {k for pair in draws for k in pair} == {3, 5, 7}
    assert any(kx != ky for kx, ky in draws)
    assert GaussianBlur(size_range=2).size_range == (0, 2)
    assert GaussianBlur(max_size=4).size_range == (0, 4)


def test_gaussian_blur_draws_like_the_reference():
    img = photo()
    aug = GaussianBlur(size_range=(0, 5), sigma_range=(0.5, 2.0), symmetric=False)
    aug.rng = seeded(21)
    params = aug._get_augment_params(img)
    ref = seeded(21)
    ksize = ref.randint(0, 5, size=(2,)) * 2 + 1
    sigma = ref.uniform(0.5, 2.0, size=(2,)).astype(np.float32)
    assert params[0] == tuple(ksize.tolist())
    np.testing.assert_array_equal(np.float32(params[1]), sigma)


def test_gaussian_blur_values_and_shapes():
    delta = np.zeros((7, 7), np.float32)
    delta[3, 3] = 1
    out = GaussianBlur()._augment(delta, ((3, 3), (0.0, 0.0)))  # cv2's 3-tap kernel is [1, 2, 1] / 4
    k = np.array([0.25, 0.5, 0.25])
    np.testing.assert_allclose(out[2:5, 2:5], np.outer(k, k), atol=1e-7)
    assert out.sum() == pytest.approx(1.0)
    np.testing.assert_array_equal(GaussianBlur()._augment(delta, ((1, 1), (0.0, 0.0))), delta)
    flat = np.full((6, 6, 1), 77, np.uint8)  # a replicated border keeps a constant image constant
    blurred = GaussianBlur()._augment(flat, ((5, 3), (0.0, 0.0)))
    assert blurred.shape == (6, 6, 1) and blurred.dtype == np.uint8 and (blurred == 77).all()
    img = photo()
    np.testing.assert_array_equal(
        GaussianBlur()._augment(img, ((5, 3), (1.5, 0.7))),
        cv2.GaussianBlur(img, (5, 3), sigmaX=1.5, sigmaY=0.7, borderType=cv2.BORDER_REPLICATE),
    )


# ---- conversions ------------------------------------------------------------------------------


def test_grayscale_shapes_and_weights():
    img = photo()
    grey = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    np.testing.assert_allclose(grey, (img.astype(np.float64) * GREY_BGR).sum(axis=2), atol=0.51)
    np.testing.assert_array_equal(Grayscale().augment(img), grey[:, :, None])
    np.testing.assert_array_equal(Grayscale(keepdims=False).augment(img), grey)
    np.testing.assert_array_equal(Grayscale(rgb=True).augment(img[..., ::-1].copy()), grey[:, :, None])
    tiled = Grayscale(keepshape=True).augment(img)
    assert tiled.shape == img.shape and (tiled == grey[:, :, None]).all()
    with pytest.raises(ValueError, match=r"keepshape=True.*keepdims=True"):
        Grayscale(keepdims=False, keepshape=True)


def test_color_space_grey_to_colour_is_hxwx3():
    grey = np.arange(12, dtype=np.uint8).reshape(3, 4)
    out = ColorSpace(cv2.COLOR_GRAY2BGR).augment(grey)
    assert out.shape == (3, 4, 3) and (out == grey[:, :, None]).all()
    assert ColorSpace(cv2.COLOR_GRAY2BGR).augment(grey[:, :, None]).shape == (3, 4, 3)
    assert ColorSpace(cv2.COLOR_BGR2GRAY).augment(photo()).shape == (40, 56, 1)
    assert ColorSpace(cv2.COLOR_BGR2GRAY, keepdims=False).augment(photo()).shape == (40, 56)
    hsv = ColorSpace(cv2.COLOR_BGR2HSV).augment(photo())
    np.testing.assert_array_equal(hsv, cv2.cvtColor(photo(), cv2.COLOR_BGR2HSV))


def test_color_space_error_names_the_image():
    with pytest.raises(ValueError, match=r"ColorSpace: cv2 cannot convert .*shape \(3, 4\).*channels"):
        ColorSpace(cv2.COLOR_BGR2GRAY).augment(np.zeros((3, 4), np.uint8))


def test_to_uint8_clips_and_truncates_and_to_float32_copies():
    img = np.array([[-5.0, 0.9, 254.7, 300.0]], np.float32)
    assert ToUint8().augment(img).tolist() == [[0, 0, 254, 255]]
    assert ToUint8().augment(img).dtype == np.uint8
    u8 = photo()
    f = ToFloat32().augment(u8)
    assert f.dtype == np.float32 and (f == u8).all()
    f32 = u8.astype(np.float32)
    assert ToFloat32().augment(f32) is not f32


# ---- noise ------------------------------------------------------------------------------------


def test_jpeg_noise_changes_a_colour_image_but_keeps_shape():
    img = photo(64, 80)
    aug = JpegNoise()
    aug.rng = seeded(0)
    qualities = {aug._get_augment_params(img) for _ in range(400)}
    assert min(qualities) == 40 and max(qualities) == 99  # randint: the top is never drawn
    out = apply(JpegNoise(), img, seed=3)
    q = seeded(3).randint(40, 100)
    ok, enc = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, q])
    assert ok
    np.testing.assert_array_equal(out, cv2.imdecode(enc, cv2.IMREAD_COLOR))
    assert out.shape == img.shape and out.dtype == np.uint8
    diff = np.abs(out.astype(int) - img)
    assert diff.max() > 0 and diff.mean() < 6
    low = JpegNoise((10, 11))._augment(img, 10)
    assert np.abs(low.astype(int) - img).mean() > diff.mean()


@pytest.mark.parametrize("shape", [(48, 64), (48, 64, 1)])
def test_jpeg_noise_keeps_grey_images_grey(shape):
    img = cv2.cvtColor(photo(48, 64), cv2.COLOR_BGR2GRAY).reshape(shape)
    out = JpegNoise()._augment(img, 50)
    assert out.shape == shape and out.dtype == np.uint8
    assert 0 < np.abs(out.astype(int) - img).mean() < 6


def test_jpeg_noise_quantises_float_input():
    img = photo().astype(np.float32) + 0.3
    out = JpegNoise()._augment(img, 90)
    assert out.dtype == np.float32 and out.shape == img.shape
    assert (out == np.round(out)).all()  # decoded 8-bit values, cast back
    expected = cv2.imdecode(
        cv2.imencode(".jpg", np.rint(img).astype(np.uint8), [cv2.IMWRITE_JPEG_QUALITY, 90])[1],
        cv2.IMREAD_COLOR,
    )
    np.testing.assert_array_equal(out, expected)


def test_gaussian_noise_matches_reference_draws():
    img = photo()
    noise = seeded(8).randn(*img.shape)
    out = apply(GaussianNoise(sigma=3), img, seed=8)
    np.testing.assert_array_equal(out, np.clip(img + noise * 3, 0, 255).astype(np.uint8))
    f = np.full((100, 100, 3), 128, np.float32)
    free = apply(GaussianNoise(sigma=2, clip=False), f, seed=8)
    assert free.dtype == np.float32
    assert (free - 128).std() == pytest.approx(2, rel=0.05)
    assert apply(GaussianNoise(sigma=50), f, seed=8).max() <= 255


def test_salt_pepper_noise_probabilities():
    img = np.full((200, 200, 3), 128, np.uint8)
    out = apply(SaltPepperNoise(white_prob=0.1, black_prob=0.2), img, seed=4)
    assert (img == 128).all()  # the input is left alone
    white, black = (out == 255).mean(), (out == 0).mean()
    assert white == pytest.approx(0.1, abs=0.01) and black == pytest.approx(0.2, abs=0.01)
    assert ((out == 128) | (out == 255) | (out == 0)).all()
    mixed = (out.min(axis=2) != out.max(axis=2)).mean()  # channels are drawn independently
    assert mixed > 0.5
    u = seeded(4).uniform(0, 1, size=img.shape)
    np.testing.assert_array_equal(out == 255, u > 0.9)
    with pytest.raises(ValueError, match="sum to at most 1"):
        SaltPepperNoise(0.6, 0.5)


# ---- rules shared by all --------------------------------------------------------------------------


def every_augmentor():
    return [
        Brightness(20),
        BrightnessScale((0.6, 1.4)),
        Contrast((0.6, 1.4)),
        Contrast((0.6, 1.4), rgb=False),
        MeanVarianceNormalize(),
        GaussianBlur(),
        Gamma(),
        Clip(),
        MinMaxNormalize(),
        Hue(),
        Saturation(),
        Lighting(0.1, EIGVAL, EIGVEC),
        Grayscale(),
        ToUint8(),
        ToFloat32(),
        JpegNoise(),
        GaussianNoise(),
        SaltPepperNoise(),
    ]


COLOUR_ONLY = (Hue, Saturation, Lighting, Grayscale)
FLOAT32_OUT = (MeanVarianceNormalize, MinMaxNormalize, ToFloat32)


@pytest.mark.parametrize("shape", [(12, 10), (12, 10, 1), (12, 10, 3)])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_dtype_and_shape_rules(shape, dtype):
    img = (np.random.RandomState(0).rand(*shape) * 255).astype(dtype)
    before = img.copy()
    coords = np.array([[1.5, 2.5], [9.0, 3.0]], np.float32)
    for aug in every_augmentor():
        name = type(aug).__name__
        if isinstance(aug, COLOUR_ONLY) and shape[2:] != (3,):
            with pytest.raises(ValueError, match=name):
                aug.augment(img)
            continue
        t = aug.get_transform(img)
        out = t.apply_image(img)
        want_dtype = (
            np.float32 if isinstance(aug, FLOAT32_OUT) else np.uint8 if isinstance(aug, ToUint8) else dtype
        )
        want_shape = (*shape[:2], 1) if isinstance(aug, Grayscale) else shape
        assert out.dtype == want_dtype, name
        assert out.shape == want_shape, name
        np.testing.assert_array_equal(t.apply_coords(coords.copy()), coords, err_msg=name)
        np.testing.assert_array_equal(img, before, err_msg=f"{name} changed its input")


def test_uint8_results_stay_in_range_and_float_clip_rule():
    img = photo().astype(np.float32) * 1.2
    for aug in (Brightness(50), BrightnessScale((1.2, 1.5)), Contrast((1.5, 2)), Saturation(0.9)):
        assert apply(aug, img, seed=0).max() <= 255, type(aug).__name__
    assert apply(BrightnessScale((1.2, 1.5), clip=False), img, seed=0).max() > 255
    assert apply(Contrast((1.5, 2), clip=False), img, seed=0).min() < 0


def test_repr_shows_arguments_that_differ_from_defaults():
    assert repr(Brightness(30)) == "imgaug.Brightness(delta=30)"
    assert repr(Contrast((0.6, 1.4), rgb=False, clip=False)) == (
        "imgaug.Contrast(factor_range=(0.6, 1.4), rgb=False, clip=False)"
    )
    assert repr(Grayscale(rgb=True)) == "imgaug.Grayscale(rgb=True)"
    assert repr(SaltPepperNoise()) == "imgaug.SaltPepperNoise()"


@pytest.mark.timeout(60)
def test_modules_do_not_import_tensorflow():
    mods = "imgproc, convert, noise"
    code = f"import sys; from towerpack.dataflow.imgaug import {mods}; print('tensorflow' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=50, check=True
    )
    assert result.stdout.strip() == "False"
