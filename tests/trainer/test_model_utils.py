"""describe_trainable_vars' table in the log, get_shape_str, and the layers' shape lines that use it."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from towerpack.trainer import Conv2D, FullyConnected, TowerContext
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.model_utils import describe_trainable_vars, format_table, get_shape_str

pytestmark = pytest.mark.usefixtures("graph")


def _logged(caplog, level=logging.INFO) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


def test_get_shape_str_of_tensors_variables_and_lists():
    x = tfv1.placeholder(tf.float32, [None, 28, 28, 1])
    v = tfv1.get_variable("v", [3, 4])
    unknown = tfv1.placeholder(tf.float32)
    assert get_shape_str(x) == "[?, 28, 28, 1]"
    assert get_shape_str([v, x]) == "[3, 4], [?, 28, 28, 1]"
    assert get_shape_str(unknown) == "<unknown>"
    assert get_shape_str(tf.constant(1.0)) == "[]"
    with pytest.raises(TypeError, match="got ndarray"):
        get_shape_str([x, np.zeros(2)])


def test_layers_log_their_shapes_with_it(caplog):
    x = tfv1.placeholder(tf.float32, [None, 8, 8, 3])
    with caplog.at_level(logging.INFO), TowerContext("", is_training=True):
        FullyConnected("fc", Conv2D("conv", x, 4, 3), 10)
    lines = _logged(caplog)
    assert "conv input: [?, 8, 8, 3]" in lines and "conv output: [?, 8, 8, 4]" in lines
    assert "fc output: [?, 10]" in lines


def test_describe_trainable_vars_logs_a_table_and_the_totals(caplog):
    tfv1.get_variable("conv0/W", [3, 3, 1, 32])
    tfv1.get_variable("conv0/b", [32])
    tfv1.get_variable("tower1/conv0/W", [3, 3, 1, 32])  # another tower's copy: not listed
    tfv1.get_variable("global_count", [], trainable=False)
    with caplog.at_level(logging.INFO):
        describe_trainable_vars()
    (text,) = _logged(caplog)
    assert text.splitlines() == [
        "Trainable variables:",
        "name     shape          #elements",
        "-------  -------------  ---------",
        "conv0/W  [3, 3, 1, 32]  288",
        "conv0/b  [32]           32",
        "Number of trainable variables: 2",
        "Number of parameters (elements): 320",
        "Storage space needed for all trainable variables: 0.00 MB",
    ]


def test_describe_trainable_vars_shows_dtype_and_device_only_when_they_vary(caplog):
    with tf.device("/cpu:0"):
        tfv1.get_variable("embedding", [1024, 256], dtype=tf.float64)
    with tf.device("/cpu:1"):
        tfv1.get_variable("steps", [2], dtype=tf.int32)
        tfv1.get_variable(
            "any_length", initializer=tfv1.placeholder_with_default([1.0], [None]), validate_shape=False
        )
    with caplog.at_level(logging.INFO):
        describe_trainable_vars()
    (text,) = _logged(caplog)
    lines = text.splitlines()
    assert lines[1].split() == ["name", "shape", "#elements", "device", "dtype"]
    assert lines[3].split() == ["embedding", "[1024,", "256]", "262144", "/device:CPU:0", "float64"]
    assert lines[4].split() == ["steps", "[2]", "2", "/device:CPU:1", "int32"]
    assert lines[5].split() == ["any_length", "[?]", "0", "/device:CPU:1", "float32"]
    assert "Number of parameters (elements): 262146" in text
    assert "Storage space needed for all trainable variables: 2.00 MB" in text  # 262144 x 8 bytes (+8)
    assert _logged(caplog, logging.WARNING) == [
        "Variable any_length has a shape that is not fully known, (None,): counted as 0"
    ]


def test_describe_trainable_vars_without_variables_warns(caplog):
    describe_trainable_vars()
    assert _logged(caplog, logging.WARNING) == ["No trainable variables in the graph"]


def test_format_table():
    assert format_table([["a", 1], ["long", 22]]) == "a     1\nlong  22"
    assert format_table([[1, 2]], headers=["x", "yy"]) == "x  yy\n-  --\n1  2"
    assert format_table([]) == ""
