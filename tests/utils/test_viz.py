"""towerpack.utils.viz: grids of patches, boxes, heat maps and dumps, checked pixel by pixel; the key and
click handling of the interactive window, and its error where OpenCV has no GUI."""

from __future__ import annotations

import logging

import cv2
import numpy as np
import pytest

from towerpack.dataflow import DataFromList
from towerpack.utils import viz
from towerpack.utils.viz import (
    KeyAction,
    PatchGrid,
    draw_boxes,
    dump_dataflow_images,
    gen_stack_patches,
    intensity_to_rgb,
    interactive_imshow,
    key_action,
    mouse_handler,
    stack_patches,
)


def test_stack_patches_lays_grey_patches_out_row_by_row():
    patches = [np.full((4, 4), v, np.uint8) for v in (10, 20, 30)]
    canvas = stack_patches(patches, nr_row=2, nr_col=2, border=1)
    assert canvas.shape == (9, 9, 1) and canvas.dtype == np.uint8
    grid = canvas[..., 0]
    assert (grid[0:4, 0:4] == 10).all() and (grid[0:4, 5:9] == 20).all() and (grid[5:9, 0:4] == 30).all()
    assert (grid[4, :] == 255).all() and (grid[:, 4] == 255).all()  # borders
    assert (grid[5:9, 5:9] == 255).all()  # the empty fourth cell


def test_stack_patches_colour_background_clipping_and_default_border():
    grey = np.array([[[-5.0], [300.0]], [[12.7], [0.0]]])  # 2x2x1, out of range and fractional
    canvas = stack_patches([grey, grey], 1, 2, border=2, bgcolor=(255, 0, 0))
    assert canvas.shape == (2, 6, 3)
    np.testing.assert_array_equal(canvas[:, :2, 0], [[0, 255], [12, 0]])
    assert (canvas[:, :2, 0] == canvas[:, :2, 2]).all()  # grey patches become three equal channels
    np.testing.assert_array_equal(canvas[0, 2], [255, 0, 0])  # a border pixel has the BGR background
    big = np.zeros((40, 20, 3), np.uint8)
    assert stack_patches([big, big], 1, 2).shape == (40, 41, 3)  # border = 5% of 20 = 1


def test_stack_patches_pads_patches_of_different_sizes():
    small = np.full((2, 2), 100, np.uint8)
    wide = np.full((4, 6, 3), 50, np.uint8)
    canvas = stack_patches([small, wide], 1, 2, border=0, pad=True, bgcolor=0)
    assert canvas.shape == (4, 12, 3)
    cell = canvas[:, :6, 0]
    np.testing.assert_array_equal(cell[1:3, 2:4], 100)  # centred
    assert cell.sum() == 100 * 4  # the rest of the cell is background
    assert (canvas[:, 6:] == 50).all()
    with pytest.raises(ValueError, match=r"different shapes .* pass pad=True"):
        stack_patches([small, wide], 1, 2)
    with pytest.raises(ValueError, match="3 patches do not fit in 1 x 2 cells"):
        stack_patches([small] * 3, 1, 2)
    with pytest.raises(ValueError, match="1 or 3 channels"):
        stack_patches(np.zeros((2, 3, 3, 2)), 1, 2)
    with pytest.raises(ValueError, match="bgcolor"):
        stack_patches([small], 1, 1, bgcolor=(1, 2))


def test_a_click_finds_its_patch_also_when_patches_are_not_square():
    grid = PatchGrid(ph=10, pw=20, rows=2, cols=3, border=2)
    assert grid.shape == (22, 64)
    assert grid.cell_index(0, 0) == 0 and grid.cell_index(25, 5) == 1 and grid.cell_index(63, 21) == 5
    assert grid.cell_index(5, 13) == 3  # the second row starts at y = 12 (the reference used the width)
    assert grid.cell_index(21, 5) is None and grid.cell_index(5, 10) is None  # on a border
    patches = np.arange(4 * 10 * 20).reshape(4, 10, 20, 1)
    clicked = []
    on_click = viz._patch_clicker(grid, patches, 0, lambda p, i: clicked.append((i, int(p[0, 0, 0]))))
    on_click(None, 25, 5)
    on_click(None, 45, 15)  # cell 5: no patch there
    assert clicked == [(1, 200)]


def test_gen_stack_patches_yields_new_pages():
    patches = np.stack([np.full((3, 3), v, np.uint8) for v in range(1, 8)])
    pages = list(gen_stack_patches(patches, nr_row=2, nr_col=2, border=1, bgcolor=0))
    assert len(pages) == 2 and pages[0] is not pages[1]
    assert pages[0][0, 0, 0] == 1 and pages[0][4, 4, 0] == 4  # page one keeps its patches
    assert pages[1][0, 0, 0] == 5 and pages[1][4, 0, 0] == 7 and pages[1][4, 4, 0] == 0
    auto = list(gen_stack_patches(patches, max_width=8, max_height=4, border=1))
    assert len(auto) == 4 and auto[0].shape == (3, 7, 1)  # 1 row x 2 columns fit
    with pytest.raises(ValueError, match="does not fit"):
        list(gen_stack_patches(patches, max_width=2))


def test_draw_boxes_draws_rectangles_and_labels_on_a_copy():
    im = np.zeros((40, 60), np.uint8)
    out = draw_boxes(im, [[10, 20, 30, 35], [0, 0, 59, 39]], labels=["a", "whole"], color=(0, 0, 255))
    assert out.shape == (40, 60, 3) and im.max() == 0  # grey in, BGR out; input untouched
    np.testing.assert_array_equal(out[35, 10:31], [[0, 0, 255]] * 21)  # bottom edge of box 0
    np.testing.assert_array_equal(out[20:36, 30], [[0, 0, 255]] * 16)  # right edge
    np.testing.assert_array_equal(out[28, 15], [0, 0, 0])  # inside: not filled
    label_area = out[8:20, 10:30]  # the label box of box 0 sits above its top-left corner
    assert (label_area == (0, 0, 255)).all(axis=-1).any() and (label_area > 150).all(axis=-1).any()
    default = draw_boxes(np.zeros((10, 10, 3), np.uint8), [[2, 2, 5, 5]])
    np.testing.assert_array_equal(default[2, 3], [15, 128, 15])
    with pytest.raises(ValueError, match="outside the"):
        draw_boxes(im, [[0, 0, 61, 10]])
    with pytest.raises(ValueError, match="1 labels for 2 boxes"):
        draw_boxes(im, [[0, 0, 1, 1], [0, 0, 2, 2]], labels=["x"])


def test_intensity_to_rgb_is_rgb_in_0_255():
    ramp = np.array([[0.0, 0.5, 1.0, 2.0]])
    gray = intensity_to_rgb(ramp, cmap="gray")
    assert gray.shape == (1, 4, 3) and gray.dtype == np.float32
    np.testing.assert_allclose(gray[0, :, 0], [0, 127.5, 255, 255], atol=1)  # above 1: the end colour
    jet = intensity_to_rgb(np.zeros((2, 2)), cmap="jet")
    assert jet[0, 0, 2] > 100 and jet[0, 0, 0] == 0  # jet starts dark blue: blue is the last channel
    normalized = intensity_to_rgb(np.array([[10.0, 20.0]]), cmap="gray", normalize=True)
    np.testing.assert_allclose(normalized[0, :, 1], [0, 255], atol=1)
    np.testing.assert_allclose(intensity_to_rgb(np.full((2, 2), 7.0), "gray", normalize=True), 0)
    with pytest.raises(ValueError, match="2-D"):
        intensity_to_rgb(np.zeros((2, 2, 1)))


def test_dump_dataflow_images_writes_exactly_the_images_asked_for(tmp_path):
    red_rgb = np.zeros((4, 6, 3), np.float32)
    red_rgb[..., 0] = 1.0  # red in RGB, in [0, 1]
    batches = [[np.stack([red_rgb] * 3), 0], [np.stack([red_rgb] * 3), 1]]
    out = tmp_path / "dump"
    n = dump_dataflow_images(
        DataFromList(batches, shuffle=False),
        number=8,
        output_dir=str(out),
        scale=255,
        resize=(8, 16),
        flipRGB=True,
    )
    assert n == 8  # the dataflow runs a second epoch to get there
    names = sorted(p.name for p in out.iterdir())
    assert names == [f"{i:03d}.jpg" for i in range(1, 9)]
    img = cv2.imread(str(out / "005.jpg"))
    assert img.shape == (8, 16, 3)  # resize is (h, w)
    b, g, r = img[4, 8].astype(int)
    assert r > 200 and g < 40 and b < 40  # flipped to BGR, so OpenCV reads it as red
    single = DataFromList([[np.zeros((5, 5), np.uint8)]], shuffle=False)
    assert dump_dataflow_images(single, batched=False, number=2, output_dir=str(tmp_path / "one")) == 2
    with pytest.raises(ValueError, match="no image in a whole epoch"):
        dump_dataflow_images(DataFromList([[np.zeros((0, 4, 4))]], shuffle=False), number=1)


def test_keys_and_clicks_of_the_interactive_window():
    callbacks = {"key_cb_q": lambda img: None, "key_cb_a": lambda img: None}
    assert key_action("q", callbacks) is KeyAction.CALLBACK  # a callback wins over the built-in key
    assert key_action("q", {}) is KeyAction.CLOSE
    assert [key_action(k, {}) for k in "xs+=-a"] == [
        KeyAction.EXIT,
        KeyAction.SAVE,
        KeyAction.ZOOM_IN,
        KeyAction.ZOOM_IN,
        KeyAction.ZOOM_OUT,
        KeyAction.RETURN,
    ]
    img = np.zeros((10, 10, 3), np.uint8)
    clicks = []
    on_mouse = mouse_handler(
        img, lambda i, x, y: clicks.append(("l", x, y)), lambda i, x, y: clicks.append(("r", x, y))
    )
    on_mouse(cv2.EVENT_LBUTTONUP, 3, 4, 0, None)
    on_mouse(cv2.EVENT_LBUTTONDOWN, 5, 5, 0, None)  # only a release counts
    on_mouse(cv2.EVENT_RBUTTONUP, 1, 2, 0, None)
    assert clicks == [("l", 3, 4), ("r", 1, 2)]
    assert viz.zoom(img, viz.ZOOM_IN).shape == (13, 13, 3)


def test_without_a_gui_interactive_imshow_warns_once_and_the_script_goes_on(caplog):
    viz._warned_no_gui.clear()
    with caplog.at_level(logging.WARNING):
        assert interactive_imshow(np.zeros((4, 4, 3), np.uint8)) is None
        canvas = stack_patches([np.zeros((2, 2), np.uint8)], 1, 1, viz=True)
    assert canvas.shape[:2] == (2, 2)
    warned = [r for r in caplog.records if "the image is not shown" in r.getMessage()]
    assert len(warned) == 1 and "no GUI or there is no display" in warned[0].getMessage()
    with pytest.raises(TypeError, match="key_cb_<key>"):
        interactive_imshow(np.zeros((4, 4, 3), np.uint8), on_key=print)
