"""towerpack.utils.argtools: memoization, map_arg, call_only_once, shapes and data formats, log_once."""

from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
import pytest

from towerpack.utils import argtools
from towerpack.utils.argtools import (
    call_only_once,
    get_data_format,
    graph_memoized,
    log_once,
    map_arg,
    memoized,
    memoized_ignoreargs,
    memoized_method,
    shape2d,
    shape4d,
)


def test_map_arg_maps_an_argument_however_it_is_passed():
    @map_arg(shape=shape2d)
    def f(x, /, shape, *rest, scale=1):
        return x, shape, rest, scale

    assert f(1, 3) == (1, [3, 3], (), 1)
    assert f(1, shape=(2, 4), scale=2) == (1, [2, 4], (), 2)
    assert f(1, 5, "a", "b") == (1, [5, 5], ("a", "b"), 1)  # positional-only and *args still work
    with pytest.raises(TypeError, match="has no argument"):
        map_arg(size=int)(f)


def test_memoized_and_memoized_ignoreargs():
    calls = []

    @memoized
    def square(x):
        calls.append(x)
        return x * x

    assert [square(3), square(3), square(4)] == [9, 9, 16] and calls == [3, 4]

    @memoized_ignoreargs
    def first(x):
        calls.append(("first", x))
        return x

    assert first(1) == 1 and first(2) == 1 and calls[-1] == ("first", 1)
    assert first.__name__ == "first"


def test_memoized_method_caches_per_object_and_by_every_argument_value():
    class Model:
        def __init__(self):
            self.calls = 0

        @memoized_method
        def scores(self, label, name=None):
            self.calls += 1
            return None if name == "none" else (label, name)

    a, b = Model(), Model()
    assert a.scores(1) == (1, None) and a.scores(1, name=None) == (1, None) and a.calls == 1
    assert a.scores(1, name="x") == (1, "x") and a.scores(1, "y") == (1, "y") and a.calls == 3
    assert a.scores(label=1, name="x") == (1, "x") and a.calls == 3
    assert a.scores(2, name="none") is None and a.scores(2, name="none") is None and a.calls == 4
    assert b.scores(1) == (1, None) and b.calls == 1  # another object, another cache


def test_call_only_once_on_a_method_and_a_property_setter():
    class Tower:
        def __init__(self):
            self._p = 0

        @call_only_once
        def build(self):
            return "built"

        @property
        def p(self):
            return self._p

        @p.setter
        @call_only_once
        def p(self, value):
            self._p = value

    t = Tower()
    assert t.build() == "built"
    with pytest.raises(RuntimeError, match=r"Tower\.build can only be called once per object"):
        t.build()
    assert Tower().build() == "built"
    t.p = 3
    with pytest.raises(RuntimeError, match=r"Tower\.p can only be called once"):
        t.p = 4
    assert t.p == 3


def test_shapes_and_data_formats():
    assert shape2d(3) == [3, 3] and shape2d(np.int64(2)) == [2, 2]
    assert shape2d((4, 5)) == [4, 5] and shape2d(np.array([6, 7])) == [6, 7] and shape2d([2.0, 3]) == [2, 3]
    for bad in (2.5, (1, 2, 3), "ab", None, True, (1.5, 2)):
        with pytest.raises(ValueError, match="must be an int or a pair of ints"):
            shape2d(bad)
    assert shape4d(3) == [1, 3, 3, 1] and shape4d((2, 5), "channels_first") == [1, 1, 2, 5]
    assert shape4d(2, "NCHW") == [1, 1, 2, 2] and shape4d(2, "channels_last") == [1, 2, 2, 1]
    assert (
        get_data_format("NHWC") == "channels_last" and get_data_format("channels_first") == "channels_first"
    )
    assert get_data_format("channels_first", keras_mode=False) == "NCHW"
    with pytest.raises(ValueError, match="unknown data_format 'NDHWC'"):
        shape4d(1, "NDHWC")


def test_log_once_logs_each_message_once(caplog):
    with caplog.at_level(logging.INFO, logger="towerpack"):
        for _ in range(3):
            log_once("argtools test: once", "warn")
            log_once("argtools test: info once")
    got = [(r.levelname, r.getMessage()) for r in caplog.records if "argtools test" in r.getMessage()]
    assert got == [("WARNING", "argtools test: once"), ("INFO", "argtools test: info once")]


def test_graph_memoized_keeps_one_cache_per_graph():
    import tensorflow.compat.v1 as tfv1

    @graph_memoized
    def shared_placeholder(name):
        return tfv1.placeholder(tfv1.float32, name=name)

    g1, g2 = tfv1.Graph(), tfv1.Graph()
    with g1.as_default():
        a = shared_placeholder("x")
        assert shared_placeholder("x") is a and shared_placeholder(name="x") is not None
    with g2.as_default():
        b = shared_placeholder("x")
    assert a is not b and a.graph is g1 and b.graph is g2
    assert [op.type for op in g1.get_operations()] == ["Placeholder", "Placeholder"]  # x, and x given by name


def test_graph_memoized_needs_a_process_that_imported_tensorflow():
    code = (
        "import sys\n"
        "from towerpack.utils.argtools import graph_memoized\n"
        "f = graph_memoized(lambda: 1)\n"
        "try:\n"
        "    f()\n"
        "except RuntimeError as e:\n"
        "    print(e)\n"
        "print('tensorflow' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "<lambda> is graph_memoized: it needs TensorFlow, which this process has not imported",
        "False",
    ]
    assert argtools.__all__ == sorted(argtools.__all__)
