"""Looking at images: grids of patches, boxes and labels, heat maps, and a window to show them in.

``stack_patches`` and ``gen_stack_patches`` lay images out in a grid (a uint8 BGR or grey canvas,
values clipped to [0, 255]); ``draw_boxes`` draws labelled boxes; ``intensity_to_rgb`` colours a
2-D map with a matplotlib colormap (matplotlib is optional); ``dump_dataflow_images`` writes or
shows the images of a dataflow.

``interactive_imshow`` needs an OpenCV built with a GUI (``opencv-python``; the
``opencv-python-headless`` that towerpack installs has none) and a display. What a key or a click
does is decided by :func:`key_action` and :func:`mouse_handler`, which need no window.
"""

from __future__ import annotations

import enum
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from .argtools import shape2d
from .fs import mkdir_p

__all__ = [
    "draw_boxes",
    "dump_dataflow_images",
    "gen_stack_patches",
    "intensity_to_rgb",
    "interactive_imshow",
    "stack_patches",
]

WINDOW_NAME = "towerpack_viz_window"
#: Where the ``s`` key of ``interactive_imshow`` saves the image shown.
SAVE_PATH = "out.png"
_log = logging.getLogger(__name__)
ZOOM_IN, ZOOM_OUT = 1.3, 0.7


# ---- the interactive window -------------------------------------------------------------------


class KeyAction(enum.Enum):
    """What ``interactive_imshow`` does for a key."""

    CALLBACK = "a key_cb_<key> callback"
    CLOSE = "q: close the window"
    EXIT = "x: exit the program"
    SAVE = "s: save the image to out.png"
    ZOOM_IN = "+ or =: show it 1.3 times larger"
    ZOOM_OUT = "-: show it 0.7 times as large"
    RETURN = "any other key: return"


_KEYS = {
    "q": KeyAction.CLOSE,
    "x": KeyAction.EXIT,
    "s": KeyAction.SAVE,
    "+": KeyAction.ZOOM_IN,
    "=": KeyAction.ZOOM_IN,
    "-": KeyAction.ZOOM_OUT,
}


def key_action(key: str, key_callbacks: Mapping[str, Callable]) -> KeyAction:
    """The action for ``key``: a ``key_cb_<key>`` entry of ``key_callbacks`` wins over the built-in keys."""
    if f"key_cb_{key}" in key_callbacks:
        return KeyAction.CALLBACK
    return _KEYS.get(key, KeyAction.RETURN)


def mouse_handler(
    img: np.ndarray, lclick_cb: Callable | None, rclick_cb: Callable | None
) -> Callable[..., None]:
    """An OpenCV mouse callback calling ``lclick_cb(img, x, y)`` / ``rclick_cb(img, x, y)`` when the
    left / right button is released."""

    def on_mouse(event: int, x: int, y: int, *_: Any) -> None:
        if event == cv2.EVENT_LBUTTONUP and lclick_cb is not None:
            lclick_cb(img, x, y)
        elif event == cv2.EVENT_RBUTTONUP and rclick_cb is not None:
            rclick_cb(img, x, y)

    return on_mouse


def zoom(img: np.ndarray, factor: float) -> np.ndarray:
    return cv2.resize(img, None, fx=factor, fy=factor, interpolation=cv2.INTER_CUBIC)


def interactive_imshow(
    img: np.ndarray, lclick_cb: Callable | None = None, rclick_cb: Callable | None = None, **kwargs: Callable
) -> None:
    """Show a BGR image in a window and wait for a key (blocks).

    Args:
        lclick_cb, rclick_cb: ``f(img, x, y)``, called on a left / right click.
        kwargs: ``key_cb_<key>=f``: ``f(img)`` is called when ``<key>`` is pressed.

    Keys: ``q`` closes the window, ``x`` exits the program, ``s`` saves the image to ``out.png``,
    ``+``/``=`` and ``-`` zoom; any other key returns.
    """
    unknown = sorted(k for k in kwargs if not k.startswith("key_cb_") or len(k) != len("key_cb_") + 1)
    if unknown:
        raise TypeError(f"interactive_imshow: unknown argument(s) {unknown}; key callbacks are key_cb_<key>")
    while True:
        if not _show(img, mouse_handler(img, lclick_cb, rclick_cb)):
            return
        key = _wait_key()
        action = key_action(key, kwargs)
        if action is KeyAction.CALLBACK:
            kwargs[f"key_cb_{key}"](img)
        elif action is KeyAction.CLOSE:
            cv2.destroyWindow(WINDOW_NAME)
        elif action is KeyAction.EXIT:
            sys.exit()
        elif action is KeyAction.SAVE:
            cv2.imwrite(SAVE_PATH, img)
        elif action in (KeyAction.ZOOM_IN, KeyAction.ZOOM_OUT):
            img = zoom(img, ZOOM_IN if action is KeyAction.ZOOM_IN else ZOOM_OUT)
            continue
        return


def _show(img: np.ndarray, on_mouse: Callable) -> bool:
    """Show ``img``; False (with a warning, once) where OpenCV has no GUI: a script that shows its
    results goes on in a batch job, as it would after the window was closed."""
    try:
        cv2.imshow(WINDOW_NAME, img)
    except cv2.error as e:
        if not _warned_no_gui:
            _warned_no_gui.append(True)
            _log.warning(
                "interactive_imshow: this OpenCV has no GUI or there is no display, so the image is not "
                "shown (install opencv-python where a display is available, or write images with "
                "cv2.imwrite). OpenCV said: %s",
                str(e).strip(),
            )
        return False
    cv2.setMouseCallback(WINDOW_NAME, on_mouse)
    return True


_warned_no_gui: list[bool] = []


def _wait_key() -> str:
    """The next key pressed in the window (codes of 128 and above, such as modifiers, are skipped)."""
    while True:
        code = cv2.waitKey(-1)
        if 0 <= code < 128:
            return chr(code)


# ---- grids of patches -------------------------------------------------------------------------


def _as_patch_array(patches: Any) -> np.ndarray:
    """An N x H x W x C array (C = 1 or 3) from a list of same-shaped images or an NHW(C) array."""
    shapes = {np.shape(p) for p in patches} if not isinstance(patches, np.ndarray) else None
    if shapes is not None and len(shapes) > 1:
        raise ValueError(f"patches have different shapes {sorted(shapes)}; pass pad=True to stack them")
    arr = np.asarray(patches)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"patches must be numeric images, got dtype {arr.dtype}")
    if arr.ndim == 3:
        arr = arr[..., np.newaxis]
    if arr.ndim != 4 or arr.shape[3] not in (1, 3):
        raise ValueError(f"patches must be NHW or NHWC images with 1 or 3 channels, got shape {arr.shape}")
    if len(arr) == 0:
        raise ValueError("no patch to stack")
    return arr


def _pad_patches(patches: Sequence[np.ndarray], bgcolor: int | Sequence[int]) -> np.ndarray:
    """Every patch centred on a background of the largest height and width, as 3-channel images."""
    colour = np.broadcast_to(np.asarray(bgcolor), (3,))
    three = []
    for p in patches:
        p = np.asarray(p)
        if p.ndim == 2:
            p = p[..., np.newaxis]
        three.append(np.repeat(p, 3, axis=2) if p.shape[2] == 1 else p)
    ph, pw = max(p.shape[0] for p in three), max(p.shape[1] for p in three)
    out = np.empty((len(three), ph, pw, 3), dtype=np.result_type(*three))
    out[...] = colour
    for i, p in enumerate(three):
        top, left = (ph - p.shape[0]) // 2, (pw - p.shape[1]) // 2
        out[i, top : top + p.shape[0], left : left + p.shape[1]] = p
    return out


@dataclass(frozen=True)
class PatchGrid:
    """The layout of ``rows`` x ``cols`` patches of ``ph`` x ``pw`` pixels with ``border`` between them."""

    ph: int
    pw: int
    rows: int
    cols: int
    border: int

    @property
    def shape(self) -> tuple[int, int]:
        return self.rows * (self.ph + self.border) - self.border, self.cols * (
            self.pw + self.border
        ) - self.border

    def cell_index(self, x: int, y: int) -> int | None:
        """The cell (row-major) under pixel (x, y); None on a border or outside the grid."""
        col, dx = divmod(int(x), self.pw + self.border)
        row, dy = divmod(int(y), self.ph + self.border)
        if not (0 <= col < self.cols and 0 <= row < self.rows) or dx >= self.pw or dy >= self.ph:
            return None
        return row * self.cols + col

    def draw(self, patches: np.ndarray, bgcolor: int | Sequence[int]) -> np.ndarray:
        """A new uint8 canvas with ``patches`` (N x ph x pw x C) in row-major order on ``bgcolor``."""
        if len(patches) > self.rows * self.cols:
            raise ValueError(f"{len(patches)} patches do not fit in {self.rows} x {self.cols} cells")
        channels = 3 if (np.ndim(bgcolor) > 0 or patches.shape[3] == 3) else 1
        canvas = np.empty((*self.shape, channels), dtype=np.uint8)
        canvas[...] = np.asarray(bgcolor, dtype=np.uint8)
        values = np.clip(patches, 0, 255).astype(np.uint8)
        if channels == 3 and values.shape[3] == 1:
            values = np.repeat(values, 3, axis=3)
        for i, patch in enumerate(values):
            row, col = divmod(i, self.cols)
            top, left = row * (self.ph + self.border), col * (self.pw + self.border)
            canvas[top : top + self.ph, left : left + self.pw] = patch
        return canvas


def _default_border(ph: int, pw: int, border: int | None) -> int:
    return int(0.05 * min(ph, pw)) if border is None else int(border)


def _check_bgcolor(bgcolor: Any) -> None:
    colour = np.asarray(bgcolor)
    if (
        colour.ndim > 1
        or (colour.ndim == 1 and colour.shape != (3,))
        or not ((colour >= 0) & (colour <= 255)).all()
    ):
        raise ValueError(f"bgcolor must be an int or a (B, G, R) triple in [0, 255], got {bgcolor!r}")


def stack_patches(
    patch_list: Any,
    nr_row: int,
    nr_col: int,
    border: int | None = None,
    pad: bool = False,
    bgcolor: int | Sequence[int] = 255,
    viz: bool = False,
    lclick_cb: Callable | None = None,
) -> np.ndarray:
    """Lay images out in a grid of ``nr_row`` x ``nr_col`` cells (row by row); returns the uint8 canvas.

    Args:
        patch_list: same-shaped images (NHW or NHWC, 1 or 3 channels, values in [0, 255]), as a
            list or one array.
        border: pixels between cells (default: 5% of the smaller side of a patch).
        pad: centre images of different sizes in cells of the largest height and width.
        bgcolor: the background, an int (grey) or a (B, G, R) triple.
        viz: show the grid with ``interactive_imshow``.
        lclick_cb: ``f(patch, index)`` called for the patch clicked on (implies ``viz``).

    The canvas is (H, W, 3) when the patches or ``bgcolor`` have colour, else (H, W, 1).
    """
    _check_bgcolor(bgcolor)
    patches = _pad_patches(patch_list, bgcolor) if pad else _as_patch_array(patch_list)
    ph, pw = patches.shape[1:3]
    grid = PatchGrid(ph, pw, int(nr_row), int(nr_col), _default_border(ph, pw, border))
    canvas = grid.draw(patches, bgcolor)
    if viz or lclick_cb is not None:
        interactive_imshow(canvas, lclick_cb=_patch_clicker(grid, patches, 0, lclick_cb))
    return canvas


def _patch_clicker(grid: PatchGrid, patches: np.ndarray, start: int, cb: Callable | None) -> Callable | None:
    """A click callback calling ``cb(patch, index)`` for the patch under the click."""
    if cb is None:
        return None

    def on_click(img: np.ndarray, x: int, y: int) -> None:
        cell = grid.cell_index(x, y)
        if cell is not None and start + cell < len(patches):
            cb(patches[start + cell], start + cell)

    return on_click


def gen_stack_patches(
    patch_list: Any,
    nr_row: int | None = None,
    nr_col: int | None = None,
    border: int | None = None,
    max_width: int = 1000,
    max_height: int = 1000,
    bgcolor: int | Sequence[int] = 255,
    viz: bool = False,
    lclick_cb: Callable | None = None,
) -> Iterator[np.ndarray]:
    """``stack_patches`` page by page: yields one canvas per ``nr_row * nr_col`` patches.

    A missing ``nr_row`` / ``nr_col`` is as many as fit in ``max_height`` / ``max_width`` pixels.
    Each page is a new array (the reference yielded one array, overwritten by the next page).
    """
    _check_bgcolor(bgcolor)
    patches = _as_patch_array(patch_list)
    ph, pw = patches.shape[1:3]
    border = _default_border(ph, pw, border)
    rows = int(max_height // (ph + border)) if nr_row is None else int(nr_row)
    cols = int(max_width // (pw + border)) if nr_col is None else int(nr_col)
    if rows < 1 or cols < 1:
        raise ValueError(f"a {ph}x{pw} patch does not fit in {max_height}x{max_width} pixels")
    grid = PatchGrid(ph, pw, rows, cols, border)
    per_page = rows * cols
    for start in range(0, len(patches), per_page):
        canvas = grid.draw(patches[start : start + per_page], bgcolor)
        if viz or lclick_cb is not None:
            interactive_imshow(canvas, lclick_cb=_patch_clicker(grid, patches, start, lclick_cb))
        yield canvas


def dump_dataflow_images(
    df: Any,
    index: int = 0,
    batched: bool = True,
    number: int = 1000,
    output_dir: str | None = None,
    scale: float = 1,
    resize: Any = None,
    viz: Any = None,
    flipRGB: bool = False,  # the reference's name
) -> int:
    """Write (as ``output_dir/001.jpg`` ...) or show the first ``number`` images of a dataflow.

    Args:
        index: the component of each datapoint that holds the image(s).
        batched: whether that component is a batch of images (NHW(C)) or one image.
        scale: multiply the values by this (e.g. 255 for images in [0, 1]).
        resize: ``(h, w)`` to resize to.
        viz: ``(rows, cols)``: show the images in pages of that grid.
        flipRGB: swap the first and third channels (RGB <-> BGR).

    The dataflow is iterated again if one epoch has fewer images. Returns the number of images.
    """
    if number < 1:
        raise ValueError(f"number must be at least 1, got {number}")
    if output_dir:
        mkdir_p(output_dir)
    size = None if resize is None else shape2d(resize, "resize")
    grid = None if viz is None else shape2d(viz, "viz")
    shown: list[np.ndarray] = []
    done = 0
    df.reset_state()
    while done < number:
        found = False
        for dp in df:
            for img in dp[index] if batched else [dp[index]]:
                found = True
                img = _prepare(np.asarray(img), scale, size, flipRGB)
                done += 1
                if output_dir:
                    cv2.imwrite(os.path.join(output_dir, f"{done:03d}.jpg"), img)
                if grid is not None:
                    shown.append(img)
                    if len(shown) == grid[0] * grid[1]:
                        stack_patches(shown, grid[0], grid[1], viz=True)
                        shown = []
                if done == number:
                    return done
        if not found:
            raise ValueError(f"the dataflow gave no image in a whole epoch ({done} of {number} done)")
    return done


def _prepare(img: np.ndarray, scale: float, size: list[int] | None, flip: bool) -> np.ndarray:
    if scale != 1:
        img = img * scale
    if size is not None:
        img = cv2.resize(img, (size[1], size[0]))  # cv2 takes (width, height)
    if flip:
        img = img[..., ::-1]
    return img


# ---- colour maps, text and boxes --------------------------------------------------------------


def intensity_to_rgb(intensity: np.ndarray, cmap: str = "cubehelix", normalize: bool = False) -> np.ndarray:
    """Colour a 2-D array of intensities in [0, 1] with a matplotlib colormap: float32 H x W x 3, **RGB**,
    in [0, 255] (flip the last axis for OpenCV's BGR).

    Args:
        cmap: a matplotlib colormap name (``'jet'``, ``'viridis'``, ...).
        normalize: first map the values to [0, 1] (min to 0, max to 1; a constant map becomes 0).

    Values outside [0, 1] take the colormap's end colours. Needs matplotlib.
    """
    intensity = np.asarray(intensity)
    if intensity.ndim != 2:
        raise ValueError(f"intensity_to_rgb needs a 2-D array, got shape {intensity.shape}")
    try:
        import matplotlib
    except ImportError:
        raise ImportError("intensity_to_rgb needs matplotlib: pip install matplotlib") from None
    values = intensity.astype(np.float64)
    if normalize:
        values = values - values.min()
        top = values.max()
        values = values / top if top > 0 else values
    colours = matplotlib.colormaps[cmap](np.clip(values, 0.0, 1.0))[..., :3]
    return (colours * 255.0).astype(np.float32)


def draw_text(
    img: np.ndarray, pos: Sequence[float], text: str, color: Sequence[int], font_scale: float = 0.4
) -> np.ndarray:
    """A uint8 copy of ``img`` with ``text`` in light grey on a ``color`` box whose bottom-left is at
    ``pos`` (x, y), moved inside the image where it would stick out at the right or top."""
    img = img.astype(np.uint8)
    font = cv2.FONT_HERSHEY_SIMPLEX
    (tw, th), _ = cv2.getTextSize(text, font, font_scale, 1)
    x0 = min(int(pos[0]), img.shape[1] - tw)
    y0 = max(int(pos[1]), int(1.15 * th))
    cv2.rectangle(img, (x0, y0 - int(1.3 * th)), (x0 + tw, y0), tuple(int(c) for c in color), -1)
    cv2.putText(img, text, (x0, y0 - int(0.25 * th)), font, font_scale, (222, 222, 222), lineType=cv2.LINE_AA)
    return img


def draw_boxes(
    im: np.ndarray, boxes: Any, labels: Sequence[str] | None = None, color: Sequence[int] | None = None
) -> np.ndarray:
    """A copy of the BGR (or grey) image ``im`` with 1-pixel ``boxes`` (N x 4: x1, y1, x2, y2) and
    their ``labels`` drawn in ``color`` (default dark green); larger boxes are drawn first."""
    boxes = np.asarray(boxes, dtype=np.int32).reshape(-1, 4)
    if labels is not None and len(labels) != len(boxes):
        raise ValueError(f"{len(labels)} labels for {len(boxes)} boxes")
    areas = (boxes[:, 2] - boxes[:, 0] + 1) * (boxes[:, 3] - boxes[:, 1] + 1)
    bad = np.flatnonzero(
        (areas <= 0)
        | (boxes[:, 0] < 0)
        | (boxes[:, 1] < 0)
        | (boxes[:, 2] > im.shape[1])
        | (boxes[:, 3] > im.shape[0])
    )
    if len(bad):
        raise ValueError(f"boxes {boxes[bad].tolist()} are empty or outside the {im.shape[:2]} image")
    im = im.copy()
    if im.ndim == 2 or (im.ndim == 3 and im.shape[2] == 1):
        im = cv2.cvtColor(im, cv2.COLOR_GRAY2BGR)
    color = (15, 128, 15) if color is None else tuple(int(c) for c in color)
    for i in np.argsort(-areas, kind="stable"):
        x1, y1, x2, y2 = (int(v) for v in boxes[i])
        if labels is not None:
            im = draw_text(im, (x1, y1), labels[i], color=color)
        cv2.rectangle(im, (x1, y1), (x2, y2), color=color, thickness=1)
    return im
