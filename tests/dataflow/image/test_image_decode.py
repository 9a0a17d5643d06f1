"""JPEG decoding for augmentation: the fast decoder gives cv2's pixels, decode_augmented gives the pixels
of decoding then augmenting (exactly without DCT scaling, within a bound with it), and its reused
buffer never leaks into results."""

from __future__ import annotations

import struct

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.image_datasets import encode_jpeg, synthetic_photo
from towerpack.dataflow import DataFromList, MultiThreadMapData, set_seed
from towerpack.dataflow.image.crop_decode import (
    DecodePlan,
    decode_augmented,
    decode_planned,
    partial_decoding,
    plan_decode,
)
from towerpack.dataflow.image.decode import Color, ImageDecodeError, decode_image, decode_jpeg, jpeg_header
from towerpack.dataflow.image.fbresnet import fbresnet_augmentor
from towerpack.dataflow.imgaug import (
    AugmentorList,
    BrightnessScale,
    CenterCrop,
    Contrast,
    Flip,
    GoogleNetRandomCropAndResize,
    RandomCrop,
    RandomCropRandomShape,
    Resize,
    ToFloat32,
    ToUint8,
)
from towerpack.dataflow.imgaug.transform import CropTransform, FlipTransform, ResizeTransform

SAMPLINGS = {
    "4:4:4": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444,
    "4:2:2": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_422,
    "4:2:0": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_420,
    "4:4:0": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_440,
    "4:1:1": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_411,
}
CV2_FLAGS = {"BGR": cv2.IMREAD_COLOR, "RGB": cv2.IMREAD_COLOR_RGB, "GRAY": cv2.IMREAD_GRAYSCALE}


def photo(h: int, w: int, seed: int = 0, texture: float = 8.0) -> np.ndarray:
    return synthetic_photo(np.random.default_rng(seed), h, w, texture=texture)


def jpeg(img: np.ndarray, quality: int = 90, sampling: str = "4:2:0", progressive: bool = False) -> bytes:
    params = [cv2.IMWRITE_JPEG_QUALITY, quality, cv2.IMWRITE_JPEG_SAMPLING_FACTOR, SAMPLINGS[sampling]]
    ok, buf = cv2.imencode(".jpg", img, [*params, cv2.IMWRITE_JPEG_PROGRESSIVE, int(progressive)])
    assert ok
    return buf.tobytes()


def with_exif_orientation(data: bytes, orientation: int, damaged: bool = False) -> bytes:
    """``data`` with an EXIF block (APP1) holding one tag, the orientation, right after SOI."""
    entry = struct.pack("<HHIHH", 0x0112, 3, 1, orientation, 0)
    tiff = b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", 1) + entry + struct.pack("<I", 0)
    if damaged:
        tiff = tiff[:12]  # the directory says one entry, which is cut off
    body = b"Exif\x00\x00" + tiff
    return data[:2] + b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body + data[2:]


def seeded_pair(augs: AugmentorList, seed: int, *fns):
    """Each of ``fns(augs)`` with the augmentors seeded the same way before it."""
    out = []
    for fn in fns:
        set_seed(seed)
        augs.reset_state()
        out.append(fn(augs))
    set_seed(None)
    return out


# ---- decoding ------------------------------------------------------------------------------------


@pytest.mark.parametrize("sampling", list(SAMPLINGS))
@pytest.mark.parametrize("progressive", [False, True])
def test_decode_image_gives_cv2s_pixels(sampling, progressive):
    data = jpeg(photo(61, 83), 85, sampling, progressive)
    assert jpeg_header(data) is not None  # the fast decoder takes it
    for color, flag in CV2_FLAGS.items():
        np.testing.assert_array_equal(
            decode_image(data, color), cv2.imdecode(np.frombuffer(data, np.uint8), flag)
        )


def test_grey_jpegs_and_other_formats_give_cv2s_pixels():
    grey = jpeg(cv2.cvtColor(photo(40, 50), cv2.COLOR_BGR2GRAY))
    _, png = cv2.imencode(".png", photo(40, 50))
    for data in (grey, png.tobytes()):
        for color, flag in CV2_FLAGS.items():
            np.testing.assert_array_equal(
                decode_image(data, color), cv2.imdecode(np.frombuffer(data, np.uint8), flag)
            )
    assert jpeg_header(png.tobytes()) is None


@pytest.mark.parametrize("orientation, damaged", [(1, False), (3, False), (6, False), (8, False), (6, True)])
def test_exif_orientation_is_applied_as_cv2_does(orientation, damaged):
    data = with_exif_orientation(jpeg(photo(30, 50)), orientation, damaged)
    plain = orientation == 1 and not damaged
    assert (jpeg_header(data) is not None) == plain  # rotated or damaged EXIF: cv2 decodes it
    expected = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if orientation in (6, 8) and not damaged:
        assert expected.shape == (50, 30, 3)
    np.testing.assert_array_equal(decode_image(data), expected)


def test_reduced_decoding_gives_cv2s_reduced_pixels():
    data = jpeg(photo(301, 417))
    header = jpeg_header(data)
    flags = {2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4, 8: cv2.IMREAD_REDUCED_COLOR_8}
    for reduce, flag in flags.items():
        out = decode_jpeg(data, header, "BGR", reduce)
        assert out.shape == (-(-301 // reduce), -(-417 // reduce), 3)
        np.testing.assert_array_equal(out, cv2.imdecode(np.frombuffer(data, np.uint8), flag))
    with pytest.raises(ValueError, match="reduce must be 1, 2, 4 or 8"):
        decode_jpeg(data, header, "BGR", 3)


def test_decoding_into_a_buffer():
    data = jpeg(photo(40, 50))
    buffer = np.empty(40 * 50 * 3 + 100, np.uint8)
    out = decode_jpeg(data, jpeg_header(data), "BGR", out=buffer)
    assert np.shares_memory(out, buffer)
    np.testing.assert_array_equal(out, decode_image(data))


def test_truncated_and_corrupt_jpegs_are_errors_naming_the_source():
    data = jpeg(photo(64, 64))
    augs = AugmentorList([RandomCrop(32)])
    for bad in (data[: len(data) // 2], data[:-2], data[:200] + bytes(len(data) - 200)):
        with pytest.raises(ImageDecodeError, match="rec-9"):
            decode_augmented(bad, augs, source="rec-9")


# ---- decode_augmented ----------------------------------------------------------------------------

EXACT_LISTS = {
    "RandomCrop": lambda: [RandomCrop((120, 150)), Flip(horiz=True)],
    "CenterCrop": lambda: [CenterCrop(200)],
    "RandomCropRandomShape": lambda: [RandomCropRandomShape(30, 40)],
    "GoogleNet": lambda: [GoogleNetRandomCropAndResize(interp=cv2.INTER_CUBIC)],
    "fbresnet train": lambda: fbresnet_augmentor(True),
    "fbresnet val": lambda: fbresnet_augmentor(False),
    "Resize first": lambda: [Resize((300, 280)), RandomCrop(64)],
    "no shape-only first": lambda: [Flip(vert=True), RandomCrop(64)],
}


@pytest.mark.parametrize("name", list(EXACT_LISTS))
def test_decode_augmented_is_decode_then_augment(name):
    # 375x500: no window is twice the target size, so nothing is decoded at a reduced scale.
    data = jpeg(photo(375, 500), sampling="4:2:2")
    augs = AugmentorList(EXACT_LISTS[name]())
    for seed in range(6):
        fast, full = seeded_pair(
            augs, seed, lambda a: decode_augmented(data, a), lambda a: a.augment(decode_image(data))
        )
        np.testing.assert_array_equal(fast, full)


@pytest.mark.parametrize("name", ["GoogleNet", "fbresnet val"])
def test_dct_scaling_stays_within_a_bound_and_can_be_turned_off(name):
    data = encode_jpeg(photo(900, 1200, texture=0.0), 90)
    header = jpeg_header(data)
    augs = AugmentorList(EXACT_LISTS[name]())
    reduced = 0
    for seed in range(8):
        set_seed(seed)
        augs.reset_state()
        reduced += plan_decode(augs.get_transform_from_shape((900, 1200, 3)).tfms, 900, 1200).reduce > 1
        fast, full, exact = seeded_pair(
            augs,
            seed,
            lambda a: decode_augmented(data, a),
            lambda a: a.augment(decode_image(data)),
            lambda a: decode_augmented(data, a, dct_scaling=False),
        )
        np.testing.assert_array_equal(exact, full)
        diff = np.abs(fast.astype(float) - full)
        assert fast.shape == full.shape and diff.mean() < 2.0
        assert 10 * np.log10(255**2 / max((diff**2).mean(), 1e-9)) > 35  # PSNR in dB
    assert reduced >= 4 and header.height == 900


def test_plan_decode_chooses_the_window_and_the_scale():
    crop, resize = CropTransform(100, 40, 500, 460), ResizeTransform(500, 460, 224, 224, cv2.INTER_CUBIC)
    plan = plan_decode([crop, resize], 900, 1200)
    assert plan.reduce == 2
    assert (plan.window.y0, plan.window.x0, plan.window.h, plan.window.w) == (50, 20, 250, 230)
    assert (plan.steps[0].h, plan.steps[0].w, plan.steps[0].new_h) == (250, 230, 224)
    exact = plan_decode([crop, resize], 900, 1200, dct_scaling=False)
    assert (exact.reduce, exact.window, exact.steps) == (1, crop, (resize,))
    big = CropTransform(0, 0, 900, 1200), ResizeTransform(900, 1200, 100, 100, cv2.INTER_LINEAR)
    assert plan_decode(big, 900, 1200).reduce == 8
    small = CropTransform(0, 0, 447, 460), ResizeTransform(447, 460, 224, 224, cv2.INTER_LINEAR)
    assert plan_decode(small, 900, 1200).reduce == 1  # 447 < 2 x 224
    whole = (ResizeTransform(900, 1200, 256, 341, cv2.INTER_CUBIC),)
    plan = plan_decode(whole, 900, 1200)
    assert plan.reduce == 2 and plan.window is None and (plan.steps[0].h, plan.steps[0].w) == (450, 600)
    flip = FlipTransform(900, 1200)
    assert plan_decode([flip, crop], 900, 1200) == plan_decode([flip, crop], 900, 1200, False)


def test_partial_decoding_is_built():
    # The C extension needs libjpeg's headers when the package is installed (Debian: libjpeg62-turbo-dev).
    assert partial_decoding(), (
        "towerpack.dataflow.image._jpeg_window was not built: install libjpeg's headers"
    )


def _windows(rng: np.random.Generator, h: int, w: int, n: int) -> list[tuple[int, int, int, int]]:
    out = [(0, 0, h, w), (h - 1, w - 1, 1, 1), (0, w - 3, h, 3)]
    while len(out) < n:
        hh, ww = int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))
        out.append((int(rng.integers(0, h - hh + 1)), int(rng.integers(0, w - ww + 1)), hh, ww))
    return out


@pytest.mark.parametrize("sampling", list(SAMPLINGS))
@pytest.mark.parametrize("progressive", [False, True])
def test_a_window_decoded_alone_has_the_pixels_of_decoding_and_cropping(sampling, progressive):
    data = jpeg(photo(117, 203), 88, sampling, progressive)
    header = jpeg_header(data)
    rng = np.random.default_rng(len(sampling) + progressive)
    for color in ("BGR", "RGB", "GRAY"):
        whole = decode_image(data, color)
        for reduce in (1, 2, 4):
            scaled = whole if reduce == 1 else decode_jpeg(data, header, color, reduce)
            for y0, x0, h, w in _windows(rng, *scaled.shape[:2], 12):
                plan = DecodePlan(reduce, CropTransform(y0, x0, h, w), ())
                np.testing.assert_array_equal(
                    decode_planned(data, header, plan, Color(color)), scaled[y0 : y0 + h, x0 : x0 + w]
                )


def test_a_window_of_a_grey_jpeg_and_one_outside_the_image():
    data = jpeg(cv2.cvtColor(photo(50, 70), cv2.COLOR_BGR2GRAY))
    header = jpeg_header(data)
    plan = DecodePlan(1, CropTransform(10, 20, 30, 40), ())
    np.testing.assert_array_equal(decode_planned(data, header, plan), decode_image(data)[10:40, 20:60])
    with pytest.raises(ValueError, match="does not fit"):
        decode_planned(data, header, DecodePlan(1, CropTransform(30, 20, 30, 40), ()))


@settings(max_examples=200, deadline=None, database=None, derandomize=True)
@given(
    height=st.integers(16, 3000),
    width=st.integers(16, 3000),
    data=st.data(),
)
def test_a_reduced_window_stays_inside_and_within_half_a_pixel(height, width, data):
    h = data.draw(st.integers(1, height))
    w = data.draw(st.integers(1, width))
    y0 = data.draw(st.integers(0, height - h))
    x0 = data.draw(st.integers(0, width - w))
    target = data.draw(st.integers(1, 300))
    plan = plan_decode([CropTransform(y0, x0, h, w), ResizeTransform(h, w, target, target, 1)], height, width)
    r = plan.reduce
    if r == 1:
        assert h < 2 * target or w < 2 * target
        return
    crop = plan.window
    rows, cols = -(-height // r), -(-width // r)
    assert crop.y0 >= 0 and crop.y0 + crop.h <= rows and crop.h >= 1
    assert crop.x0 >= 0 and crop.x0 + crop.w <= cols and crop.w >= 1
    for start, size, exact_start, exact_size in ((crop.y0, crop.h, y0, h), (crop.x0, crop.w, x0, w)):
        assert abs(start - exact_start / r) <= 0.5
        assert abs(start + size - (exact_start + exact_size) / r) <= 0.5


def test_results_never_share_the_reused_buffer():
    datas = [jpeg(photo(120, 160, seed=s)) for s in range(3)]
    augs = AugmentorList([CenterCrop(64)])  # the result would be a view of the decoded image
    first = decode_augmented(datas[0], augs)
    kept = first.copy()
    for data in datas[1:]:
        other = decode_augmented(data, augs)
        assert not np.shares_memory(other, first)
    np.testing.assert_array_equal(first, kept)


def test_threads_decode_and_colour_in_buffers_of_their_own():
    datas = [jpeg(photo(150 + 10 * s, 200, seed=s)) for s in range(24)]
    # Fixed parameters, so that every thread's result can be checked against a serial one.
    augs = AugmentorList(
        [CenterCrop(100), ToFloat32(), BrightnessScale((1.2, 1.2)), Contrast((0.8, 0.8)), ToUint8()]
    )
    serial = [decode_augmented(d, augs) for d in datas]
    df = MultiThreadMapData(
        DataFromList([[i, d] for i, d in enumerate(datas)], shuffle=False),
        4,
        lambda dp: [dp[0], decode_augmented(dp[1], augs)],
        strict=True,
    )
    df.reset_state()
    seen = set()
    for _ in range(3):
        for i, img in df:
            np.testing.assert_array_equal(img, serial[i])
            seen.add(i)
    assert seen == set(range(24))
