"""towerpack.utils.stats (counters) and towerpack.utils.timer (timed blocks, stopwatches)."""

from __future__ import annotations

import logging
import re
import time

import numpy as np
import pytest

from towerpack.utils import timer
from towerpack.utils.stats import Accuracy, BinaryStatistics, OnlineMoments, RatioCounter, StatCounter


def test_stat_counter_over_scalars_and_arrays():
    s = StatCounter()
    with pytest.raises(ValueError, match="average: no value was fed"):
        s.average  # noqa: B018
    for v in (3, 1, 2):
        s.feed(v)
    assert (s.count, s.sum, s.average, s.max, s.min) == (3, 6, 2.0, 3, 1)
    assert s.samples() == [3, 1, 2]
    s.feed(np.array([10.0, -4.0]))  # an array adds all its elements
    assert s.count == 4 and s.sum == 12.0 and s.max == 10.0 and s.min == -4.0
    assert s.average == pytest.approx(12.0 / 5)
    s.reset()
    assert s.count == 0


def test_ratio_counter_and_accuracy():
    r = RatioCounter()
    assert r.ratio == 0
    r.feed(3, 4)
    r.feed(1)
    assert (r.count, r.total, r.ratio) == (4, 5, 0.8)
    r.reset()
    assert (r.count, r.total) == (0, 0)
    a = Accuracy()
    a.feed(9, 10)
    assert a.accuracy == a.ratio == 0.9


def test_binary_statistics():
    b = BinaryStatistics()
    assert (b.precision, b.recall, b.false_positive, b.false_negative) == (0, 0, 0, 0)
    pred = np.array([1, 1, 1, 0, 0, 0, 1])
    label = np.array([1, 1, 0, 0, 1, 0, 0])
    b.feed(pred, label)
    # tp = 2, fp = 2, fn = 1, tn = 2
    assert (b.nr_pos, b.nr_neg, b.nr_pred_pos, b.nr_pred_neg, b.corr_pos, b.corr_neg) == (3, 4, 4, 3, 2, 2)
    assert b.precision == 0.5 and b.recall == pytest.approx(2 / 3)
    assert b.false_positive == 0.5 and b.false_negative == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match=r"pred has shape \(2,\), label \(3,\)"):
        b.feed([1, 0], [1, 0, 1])


def test_online_moments_match_numpy():
    rng = np.random.RandomState(0)
    data = rng.normal(3.0, 2.0, size=(500, 4))
    m = OnlineMoments()
    m.feed(data[0])
    assert np.isnan(m.variance).all() and m.count == 1
    for row in data[1:]:
        m.feed(row)
    np.testing.assert_allclose(m.mean, data.mean(axis=0))
    np.testing.assert_allclose(m.variance, data.var(axis=0, ddof=1))
    np.testing.assert_allclose(m.std, data.std(axis=0, ddof=1))
    scalars = OnlineMoments()
    for v in (1.0, 2.0, 4.0):
        scalars.feed(v)
    assert scalars.mean == pytest.approx(7 / 3) and scalars.variance == pytest.approx(
        np.var([1, 2, 4], ddof=1)
    )
    with pytest.raises(ValueError, match="no value"):
        OnlineMoments().mean  # noqa: B018


def test_timed_operation_logs_the_time_unless_the_block_fails(caplog):
    with caplog.at_level(logging.INFO, logger="towerpack"):
        with timer.timed_operation("loading data", log_start=True):
            time.sleep(0.05)
        with pytest.raises(KeyError), timer.timed_operation("failing"):
            raise KeyError("x")
    messages = [r.getMessage() for r in caplog.records if r.name == "towerpack"]
    assert messages[0] == "Start loading data ..."
    (line,) = [m for m in messages if "finished" in m]
    seconds = float(re.fullmatch(r"Loading data finished, time:(\d+\.\d{4}) sec\.", line).group(1))
    assert 0.04 < seconds < 5
    with pytest.raises(ValueError), timer.timed_operation(""):
        pass


def test_timer_pauses():
    t = timer.Timer()
    time.sleep(0.05)
    t.pause()
    assert t.is_paused()
    paused_at = t.seconds()
    time.sleep(0.1)
    assert t.seconds() == paused_at  # the clock stands still while paused
    with pytest.raises(RuntimeError, match="already paused"):
        t.pause()
    t.resume()
    time.sleep(0.05)
    assert 0.09 < t.seconds() < 0.14 + 2
    with pytest.raises(RuntimeError, match="not paused"):
        t.resume()
    t.reset()
    assert t.seconds() < 0.05


def test_iter_speed_counter_and_total_timer(caplog):
    counter = timer.IterSpeedCounter(2, "step")
    with caplog.at_level(logging.INFO, logger="towerpack"):
        for _ in range(5):
            counter()
        for _ in range(3):
            with timer.total_timer("block"):
                pass
        timer.print_total_timer()
    del timer._TOTALS["block"]  # not printed again at exit
    lines = [r.getMessage() for r in caplog.records]
    assert sum(bool(re.fullmatch(r"step: \d+\.\d\d sec, [24] times, .* sec/time", m)) for m in lines) == 2
    assert any(re.fullmatch(r"Total Time: block -> \d+\.\d\d sec, 3 times, .* sec/time", m) for m in lines)
