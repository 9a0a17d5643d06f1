"""rms, print_stat (its printout captured from the process's stderr) and psnr, run in sessions."""

from __future__ import annotations

import numpy as np
import pytest

from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.symbolic_functions import print_stat, psnr, rms

pytestmark = pytest.mark.usefixtures("graph")


def _run(fetches, feed=None):
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        return sess.run(fetches, feed)


def test_rms_value_and_names():
    x = tf.constant([3.0, -4.0, 0.0, 0.0], name="x")
    with tfv1.name_scope("outer"):
        default = rms(x)  # named after x, wherever it is built
        named = rms(x, name="mine")  # relative to the current name scope
    assert (default.op.name, named.op.name) == ("x/rms", "outer/mine")
    ops = {op.name for op in tfv1.get_default_graph().get_operations()}
    assert {"x/rms/Mean", "outer/mine/Mean"} <= ops and "Mean" not in ops  # nothing left at the root
    assert _run([default, named]) == pytest.approx([2.5, 2.5])


def test_print_stat_prints_shape_mean_rms_and_values_when_computed(capfd):
    x = tfv1.placeholder(tf.float32, [None, 3], name="act")
    with tfv1.name_scope("block"):
        y = print_stat(x)
        labels = print_stat(tf.constant([1, 2, 4], name="labels"), message="the labels")
    assert y.op.name == "block/print_act"
    capfd.readouterr()
    out = _run(y * 2, {x: [[1.0, 2.0, 2.0], [0.0, 0.0, 1.0]]})
    np.testing.assert_allclose(out, [[2, 4, 4], [0, 0, 2]])  # x passes through unchanged
    err = capfd.readouterr().err
    assert "act [2 3] 1 1.29099" in err  # shape, mean, rms
    assert "[[1 2 2]\n [0 0 1]]" in err
    assert _run(labels).tolist() == [1, 2, 4]
    # An integer tensor: no rms; the message replaces the name.
    assert "the labels [3] 2 [1 2 4]" in capfd.readouterr().err


def test_print_stat_prints_each_time_and_shows_20_values_per_dimension(capfd):
    x = print_stat(tf.range(100.0, name="ramp"), message="ramp")
    with tfv1.Session() as sess:
        capfd.readouterr()
        sess.run(x)
        sess.run(x)
    err = capfd.readouterr().err
    assert err.count("ramp [100] 49.5") == 2
    line = err.splitlines()[0]
    assert "19 ... 80" in line and " 20 " not in line


def test_print_stat_rejects_a_python_value():
    with pytest.raises(TypeError, match="print_stat takes a graph tensor or variable, got list"):
        print_stat([1.0, 2.0])


def test_psnr_with_and_without_a_peak():
    pred = tf.constant([[0.5, 0.5], [0.2, 0.8]])
    truth = tf.constant([[0.4, 0.6], [0.2, 0.8]])  # MSE = 0.005
    scaled = psnr(pred * 255.0, truth * 255.0, maxp=255)
    unit = psnr(pred, truth, maxp=1.0, name="unit_psnr")
    no_peak = psnr(pred, truth)
    assert (scaled.op.name, unit.op.name, no_peak.op.name) == ("psnr", "unit_psnr", "psnr_1")
    expected = -10 * np.log10(0.005)
    assert _run([scaled, unit, no_peak]) == pytest.approx([expected] * 3, rel=1e-5)
    # Without a peak the value is -10 log10(MSE): the same as a peak of 1.
    images = tf.constant([[10.0, 20.0]])
    assert _run(psnr(images, images + 2.0)) == pytest.approx(-10 * np.log10(4.0), rel=1e-6)


@pytest.mark.parametrize("maxp", [0, -1.0, "255", [255]])
def test_psnr_rejects_a_bad_peak(maxp):
    x = tf.constant([1.0])
    with pytest.raises(ValueError, match="maxp must be a positive number or None"):
        psnr(x, x, maxp=maxp)
