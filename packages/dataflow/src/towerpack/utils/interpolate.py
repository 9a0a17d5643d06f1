"""``interp2d``: SciPy's two-dimensional spline interpolator, which SciPy 1.14 removed, with its behaviour.

TensorFlow 1 era code (the reference's Mask R-CNN mask pasting among it) builds ``interp2d(x, y, z)``
and calls the result at new coordinates. SciPy's suggested replacements differ in the details such
code relies on: the result's orientation (rows follow ``y``), the sorting of unsorted query points,
repeated and non-finite query points, and ``fill_value`` outside the data. This class keeps them,
on SciPy's maintained FITPACK wrappers, which computed the removed class's splines:

- on a rectilinear grid (``z.size == len(x) * len(y)``, ``z`` shaped ``(len(y), len(x))``), the
  interpolating spline of ``RectBivariateSpline`` (smoothing 0);
- on scattered points (``x``, ``y``, ``z`` of one length), ``bisplrep`` with smoothing 0.

``towerpack port`` rewrites ``scipy.interpolate.interp2d`` to this class. It needs SciPy (the caller
already imported it). New code should use ``scipy.interpolate.RegularGridInterpolator``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["interp2d"]

_DEGREES = {"linear": 1, "cubic": 3, "quintic": 5}


class interp2d:  # SciPy's name, so ported code reads as before
    """``interp2d(x, y, z, kind="linear", copy=True, bounds_error=False, fill_value=None)``; calling it
    with ``(xnew, ynew)`` gives values of shape ``(len(ynew), len(xnew))`` at the sorted coordinates
    (a 1-D array when ``ynew`` has one element).

    Outside the data, ``fill_value`` where it is given, else the spline's value at the nearest edge;
    ``bounds_error=True`` raises instead. A NaN coordinate gives NaN."""

    def __init__(self, x, y, z, kind="linear", copy=True, bounds_error=False, fill_value=None):
        from scipy import interpolate

        if kind not in _DEGREES:
            raise ValueError(f"interp2d: kind={kind!r} is not one of {sorted(_DEGREES)}")
        k = _DEGREES[kind]
        x, y, z = (np.array(a, dtype=float, copy=copy) for a in (x, y, z))
        x, y = x.ravel(), y.ravel()
        if z.size == x.size * y.size:
            z = z.reshape(y.size, x.size)
            if np.any(np.diff(x) < 0):
                order = np.argsort(x, kind="stable")
                x, z = x[order], z[:, order]
            if np.any(np.diff(y) < 0):
                order = np.argsort(y, kind="stable")
                y, z = y[order], z[order, :]
            spline = interpolate.RectBivariateSpline(x, y, z.T, kx=k, ky=k, s=0)
            self.tck = (*spline.tck, k, k)
        elif x.size == y.size == z.size:
            self.tck = interpolate.bisplrep(x, y, z.ravel(), kx=k, ky=k, s=0)
        else:
            raise ValueError(
                f"interp2d: z has {z.size} values; a grid needs len(x) * len(y) = {x.size * y.size}, "
                f"scattered points len(x) = len(y) = len(z) (got {x.size} and {y.size})"
            )
        self.bounds_error = bounds_error
        self.fill_value = fill_value
        self.x_min, self.x_max = float(np.min(x)), float(np.max(x))
        self.y_min, self.y_max = float(np.min(y)), float(np.max(y))

    def __call__(self, x, y, dx=0, dy=0, assume_sorted=False):
        from scipy import interpolate

        x, y = np.atleast_1d(np.asarray(x, dtype=float)), np.atleast_1d(np.asarray(y, dtype=float))
        if x.ndim != 1 or y.ndim != 1:
            raise ValueError("interp2d: the new x and y must both be one-dimensional")
        if not assume_sorted:
            x, y = np.sort(x, kind="stable"), np.sort(y, kind="stable")  # NaN sorts last
        out_x = (x < self.x_min) | (x > self.x_max)
        out_y = (y < self.y_min) | (y > self.y_max)
        if self.bounds_error and (out_x.any() or out_y.any()):
            raise ValueError(
                f"interp2d: a value is outside the data's range x [{self.x_min}, {self.x_max}], "
                f"y [{self.y_min}, {self.y_max}]"
            )
        # FITPACK clamps a point outside to the edge; a NaN it cannot place is evaluated at the edge
        # (at the last place, where NaN sorts) and given NaN afterwards.
        nan_x, nan_y = np.isnan(x), np.isnan(y)
        xs = np.where(nan_x, self.x_max, np.clip(x, self.x_min, self.x_max))
        ys = np.where(nan_y, self.y_max, np.clip(y, self.y_min, self.y_max))
        z = np.atleast_2d(interpolate.bisplev(xs, ys, self.tck, dx, dy)).T
        z[:, nan_x] = np.nan
        z[nan_y, :] = np.nan
        if self.fill_value is not None:
            z[:, out_x] = self.fill_value
            z[out_y, :] = self.fill_value
        return z[0] if len(z) == 1 else z
