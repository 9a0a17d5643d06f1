"""towerpack.utils.interpolate.interp2d behaves as SciPy's removed interp2d did (what `towerpack port`
rewrites it to): grid orientation, sorted query points, fill outside, the edge value without a fill,
NaN coordinates, scattered data and the errors. (Checked value for value against SciPy 1.13.1's own
interp2d, linear and cubic, on grids, scattered points and zero-width boxes, when it was written.)"""

from __future__ import annotations

import numpy as np
import pytest

from towerpack.utils.interpolate import interp2d


def test_linear_on_a_grid_reproduces_a_bilinear_function_with_rows_following_y():
    x, y = np.array([0.0, 1.0, 3.0]), np.array([0.0, 2.0])
    z = np.add.outer(10 * y, x)  # z[i, j] = 10 * y[i] + x[j], shaped (len(y), len(x))
    f = interp2d(x, y, z)
    xs, ys = np.array([0.5, 2.0, 2.5]), np.array([0.5, 1.0, 1.5, 2.0])
    assert f(xs, ys).shape == (4, 3)
    np.testing.assert_allclose(f(xs, ys), np.add.outer(10 * ys, xs))
    np.testing.assert_allclose(f([2.0], [1.0]), [12.0])  # one row: a 1-D result


def test_query_points_are_sorted_and_repeats_are_kept():
    f = interp2d([0, 1], [0, 1], [[0, 1], [1, 2]])
    np.testing.assert_allclose(f([1.0, 0.0, 0.5, 0.5], [0.0]), [0.0, 0.5, 0.5, 1.0])


def test_outside_the_data_fill_value_else_the_edge_and_bounds_error_raises():
    z = [[0.0, 1.0], [1.0, 2.0]]
    np.testing.assert_allclose(
        interp2d([0, 1], [0, 1], z, fill_value=-1.0)([-1.0, 0.5, 3.0], [0.0]), [-1, 0.5, -1]
    )
    np.testing.assert_allclose(interp2d([0, 1], [0, 1], z)([-1.0, 0.5, 3.0], [0.0]), [0.0, 0.5, 1.0])
    with pytest.raises(ValueError, match="outside the data's range"):
        interp2d([0, 1], [0, 1], z, bounds_error=True)([2.0], [0.0])


def test_a_zero_width_box_as_mask_pasting_makes_it_gives_nan_and_the_fill():
    """(x - x0) / (x1 - x0) with x1 == x0: NaN at 0/0, infinities elsewhere."""
    mask = np.ones((4, 4))
    f = interp2d(np.arange(4) + 0.5, np.arange(4) + 0.5, mask, fill_value=0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        xs = (np.array([1.0, 2.0, 3.0]) - 2.0) / 0.0
    values = f(xs, [1.0, 2.0])
    assert values.shape == (2, 3)
    assert np.isnan(values[:, 2]).all() and (values[:, :2] == 0).all()  # NaN sorts last
    assert not (values >= 0.5).any()


def test_cubic_reproduces_a_cubic_and_scattered_points_interpolate():
    x = y = np.linspace(0, 3, 7)
    z = np.add.outer(y**3, x**2)
    np.testing.assert_allclose(
        interp2d(x, y, z, kind="cubic")([0.3, 2.2], [1.7]), 1.7**3 + np.array([0.09, 4.84])
    )
    rng = np.random.RandomState(0)
    px, py = rng.rand(30), rng.rand(30)
    with pytest.warns(RuntimeWarning):  # FITPACK's note on an interpolating surface
        f = interp2d(px, py, 2 * px + 3 * py, kind="linear")
    np.testing.assert_allclose([f([a], [b])[0] for a, b in zip(px, py, strict=True)], 2 * px + 3 * py)


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match="kind='nearest'"):
        interp2d([0, 1], [0, 1], [[0, 1], [1, 2]], kind="nearest")
    with pytest.raises(ValueError, match="a grid needs len"):
        interp2d([0, 1, 2], [0, 1], [1, 2, 3, 4])
    with pytest.raises(ValueError, match="one-dimensional"):
        interp2d([0, 1], [0, 1], [[0, 1], [1, 2]])([[0.5]], [0.5])
