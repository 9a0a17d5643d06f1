"""`towerpack port` on tf.contrib: each way a project writes a contrib name is rewritten to its exact
home (text in, text out), a second port changes nothing, names without a home are reported with the
nearest replacement, every home in the table exists in the installed packages, and a ported graph
computes what TensorFlow 1 did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from towerpack.port.cli import report
from towerpack.port.codemod import port_source, port_text
from towerpack.port.findings import Kind
from towerpack.port.tf1.contrib_coverage import REFERENCE_EXAMPLES, coverage, upgrade_v2
from towerpack.port.tf1.contrib_table import NEAREST, TABLE, Covers, Rewrite

RESOLVE_TIMEOUT_S = 600


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# (TensorFlow 1 source, the ported source)
CASES = {
    "a dotted use through `tf` gets its home and one import": (
        """
        import tensorflow as tf

        reg = tf.contrib.layers.l2_regularizer(1e-4)
        init = tf.contrib.layers.variance_scaling_initializer(2.0)
        """,
        """
        import tensorflow.compat.v1 as tf
        import tf_slim

        reg = tf_slim.l2_regularizer(1e-4)
        init = tf_slim.variance_scaling_initializer(2.0)
        """,
    ),
    "an import already there is not added again": (
        """
        import tensorflow as tf
        import tf_slim

        reg = tf.contrib.layers.l2_regularizer(1e-4)
        """,
        """
        import tensorflow.compat.v1 as tf
        import tf_slim

        reg = tf_slim.l2_regularizer(1e-4)
        """,
    ),
    "a name assigned tf.contrib.slim becomes an import of tf_slim": (
        """
        import tensorflow as tf

        slim = tf.contrib.slim  # the layers


        def net(x):
            with slim.arg_scope([slim.conv2d], padding="SAME"):
                return slim.layers.conv2d(x, 8, 3)
        """,
        """
        import tensorflow.compat.v1 as tf

        import tf_slim as slim  # the layers


        def net(x):
            with slim.arg_scope([slim.conv2d], padding="SAME"):
                return slim.layers.conv2d(x, 8, 3)
        """,
    ),
    "from tensorflow.contrib import slim": (
        """
        import tensorflow as tf
        from tensorflow.contrib import slim

        y = slim.fully_connected(tf.zeros([1, 2]), 3)
        """,
        """
        import tensorflow.compat.v1 as tf
        import tf_slim as slim

        y = slim.fully_connected(tf.zeros([1, 2]), 3)
        """,
    ),
    "import tensorflow.contrib.slim as slim": (
        """
        import tensorflow.contrib.slim as slim

        y = slim.flatten
        """,
        """
        import tf_slim as slim

        y = slim.flatten
        """,
    ),
    "names imported from contrib modules; one without a home stays": (
        """
        from tensorflow.contrib.layers import xavier_initializer as xavier
        from tensorflow.contrib.framework import arg_scope, smart_cond
        from tensorflow.contrib.slim.nets import resnet_v1

        init = xavier()
        net = resnet_v1.resnet_v1_50
        """,
        """
        from tf_slim import xavier_initializer as xavier
        from tensorflow.contrib.framework import smart_cond
        from tf_slim import arg_scope
        from tf_slim.nets import resnet_v1

        init = xavier()
        net = resnet_v1.resnet_v1_50
        """,
    ),
    "TensorFlow's own homes use the module's `tf`; TFP's get `tfp`": (
        """
        import tensorflow as tf

        tfd = tf.contrib.distributions
        flat = tf.contrib.framework.nest.flatten([1, [2]])
        dist = tf.contrib.distributions.Normal(0.0, 1.0)
        cell = tf.contrib.rnn.LSTMCell(8)
        data = tf.contrib.data.map_and_batch
        """,
        """
        import tensorflow.compat.v1 as tf
        import tensorflow_probability as tfp

        from tensorflow_probability import distributions as tfd
        flat = tf.nest.flatten([1, [2]])
        dist = tfp.distributions.Normal(0.0, 1.0)
        cell = tf.nn.rnn_cell.LSTMCell(8)
        data = tf.data.experimental.map_and_batch
        """,
    ),
    "a module alias with a name without a home: the others are rewritten, the alias stays": (
        """
        import tensorflow as tf

        rnn = tf.contrib.rnn
        cell = rnn.MultiRNNCell([rnn.LSTMBlockCell(8), rnn.BasicLSTMCell(8)])
        """,
        """
        import tensorflow.compat.v1 as tf

        rnn = tf.contrib.rnn
        cell = tf.nn.rnn_cell.MultiRNNCell([rnn.LSTMBlockCell(8), tf.nn.rnn_cell.BasicLSTMCell(8)])
        """,
    ),
    "an alias whose uses all moved elsewhere goes; its blank line stays": (
        """
        import tensorflow as tf

        rnn = tf.contrib.rnn
        state = rnn.LSTMStateTuple(1, 2)
        """,
        """
        import tensorflow.compat.v1 as tf

        state = tf.nn.rnn_cell.LSTMStateTuple(1, 2)
        """,
    ),
    "calls the home reads differently stay; renamed keywords are renamed": (
        """
        import tensorflow as tf

        a = tf.contrib.distributions.Categorical(logits=[0.0, 1.0], dtype=tf.int64)
        b = tf.contrib.distributions.Categorical([0.0, 1.0], None, tf.int64, True)
        c = tf.contrib.distributions.MultivariateNormalDiag([0.0], scale_identity_multiplier=2.0)
        v = tf.contrib.framework.load_variable(checkpoint_dir="ckpt", name="w")
        """,
        """
        import tensorflow.compat.v1 as tf
        import tensorflow_probability as tfp

        a = tfp.distributions.Categorical(logits=[0.0, 1.0], dtype=tf.int64)
        b = tf.contrib.distributions.Categorical([0.0, 1.0], None, tf.int64, True)
        c = tf.contrib.distributions.MultivariateNormalDiag([0.0], scale_identity_multiplier=2.0)
        v = tf.train.load_variable(ckpt_dir_or_file="ckpt", name="w")
        """,
    ),
    "without a TensorFlow import, one is added for TensorFlow's own homes": (
        """
        from tensorflow.contrib import rnn

        cell = rnn.GRUCell(4)
        """,
        """
        import tensorflow.compat.v1 as tf

        cell = tf.nn.rnn_cell.GRUCell(4)
        """,
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_rewrite(case):
    before, after = (src(text) for text in CASES[case])
    assert port_text(before) == after


@pytest.mark.parametrize("case", CASES)
def test_porting_twice_is_porting_once(case):
    once = port_text(src(CASES[case][0]))
    assert port_text(once) == once


def found(code: str) -> list[tuple[int, Kind, str]]:
    findings, notes = report([("m.py", port_source(src(code), "m.py"))])
    assert notes == []
    return [(f.line, f.kind, f.message) for f in findings]


def test_names_without_a_home_are_reported_with_the_nearest_replacement_and_rewritten_ones_are_not():
    findings = found(
        """
        import tensorflow as tf

        rnn = tf.contrib.rnn
        cells = [rnn.LSTMBlockCell(8), tf.contrib.rnn.LSTMBlockCell(8), rnn.BasicLSTMCell(8)]
        reg = tf.contrib.layers.l2_regularizer(1e-4)
        """
    )
    assert [(line, kind) for line, kind, _ in findings] == [
        (4, Kind.TF_CONTRIB),  # the alias stays for LSTMBlockCell (line 2 is the added `import tf_slim`)
        (5, Kind.TF_CONTRIB),
        (5, Kind.TF_CONTRIB),
    ]
    nearest = "no exact replacement; nearest: tf.compat.v1.nn.rnn_cell.LSTMCell: the same LSTM"
    messages = sorted(message for _, _, message in findings)
    assert messages[0].startswith("`rnn.LSTMBlockCell` (tf.contrib.rnn.LSTMBlockCell): tf.contrib is gone")
    assert nearest in messages[0]
    assert (
        messages[1].startswith("`tf.contrib.rnn.LSTMBlockCell`: tf.contrib is gone")
        and nearest in messages[1]
    )
    assert messages[2].startswith("`tf.contrib.rnn`: ")


def test_a_call_left_in_place_is_reported_with_its_home_and_why_it_stayed():
    ((line, kind, message),) = found(
        """
        import tensorflow as tf

        b = tf.contrib.distributions.Categorical([0.0, 1.0], None, tf.int64, True)
        """
    )
    assert (line, kind) == (3, Kind.TF_CONTRIB)
    assert (
        "its exact home is tfp.distributions.Categorical (pip install 'towerpack-trainer[contrib]')"
        in message
    )
    assert "at most 3 argument(s) by position" in message


def test_a_home_that_is_not_installed_is_named_with_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "tf_slim", None)  # as if tf-slim were not installed
    findings = found(
        """
        import tensorflow as tf

        reg = tf.contrib.layers.l2_regularizer(1e-4)
        """
    )
    assert findings == [
        (2, Kind.TF_CONTRIB, "`tf_slim` is not installed here: pip install 'towerpack-trainer[contrib]'")
    ]


# Run in a child: tf.compat.v1.nn.rnn_cell exists only with tf-keras and TF_USE_LEGACY_KERAS=1, which
# must be set before TensorFlow is imported (as towerpack.trainer does).
RESOLVE = """
import importlib, json
from towerpack.port.tf1.contrib_table import NEAREST, TABLE, Covers

def attribute(dotted):
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for name in parts[end:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(dotted)

problems = []
objects = {}
for path, entry in TABLE.items():
    target = entry.target
    try:
        obj = importlib.import_module(target.module)
        for name in filter(None, target.path.split(".")):
            obj = getattr(obj, name)
        objects[path] = obj
        if entry.covers is not Covers.NAME and not isinstance(obj, type(importlib)):
            problems.append(f"{path}: {target.dotted} is not a module")
    except Exception as e:
        problems.append(f"{path}: {target.dotted}: {type(e).__name__}: {e}")
# After every attribute was read: a `from` import must give the same object.
for path, obj in objects.items():
    where = TABLE[path].target.from_import()
    if where is None:
        continue
    module, name = where
    try:
        imported = getattr(importlib.import_module(module), name) if module else importlib.import_module(name)
    except Exception as e:
        problems.append(f"{path}: from {module} import {name}: {type(e).__name__}: {e}")
        continue
    if imported is not obj:
        problems.append(f"{path}: from {module} import {name} is another object than the attribute")
for path, entry in NEAREST.items():
    if entry.api is not None:
        try:
            attribute(entry.api)
        except Exception as e:
            problems.append(f"{path}: {entry.api}: {type(e).__name__}: {e}")
print(json.dumps(problems))
"""


def test_every_home_in_the_table_exists_in_the_installed_packages():
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3")
    run = subprocess.run(
        [sys.executable, "-c", RESOLVE], capture_output=True, text=True, env=env, timeout=RESOLVE_TIMEOUT_S
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == []


def test_the_table_answers_every_contrib_name_tf_upgrade_v2_handles():
    upgrade = upgrade_v2()
    assert len(upgrade.converted) > 90  # the tables were read
    missing = sorted(p for p in upgrade.converted | upgrade.flagged if p not in TABLE and p not in NEAREST)
    assert missing == []


def test_tensorflow_homes_agree_with_tf_upgrade_v2_or_say_why_not():
    def v1(path: str) -> str:
        for prefix in ("tf.compat.v1.", "tf.compat.v2.", "tf."):
            if path.startswith(prefix):
                return path[len(prefix) :]
        return path

    disagree = []
    for path, new in upgrade_v2().renames.items():
        entry = TABLE.get(path)
        if not isinstance(entry, Rewrite) or entry.note:
            continue
        if entry.target.dotted != f"tensorflow.compat.v1.{v1(new)}":
            disagree.append((path, entry.target.dotted, new))
    assert disagree == []


def test_the_reference_examples_are_counted_against_the_table():
    counted = coverage(REFERENCE_EXAMPLES)
    assert (counted.total, counted.rewritten, counted.nearest) == (14, 13, 1)
    assert all(entry.covers is Covers.NAME for p, entry in TABLE.items() if p in REFERENCE_EXAMPLES)


TF1_MODEL = """
import tensorflow as tf

slim = tf.contrib.slim


def model(x):
    init = tf.contrib.layers.variance_scaling_initializer()
    reg = tf.contrib.layers.l2_regularizer(0.01)
    scope = tf.contrib.framework.arg_scope
    with scope([slim.fully_connected], weights_initializer=init, weights_regularizer=reg):
        y = slim.fully_connected(x, 400, activation_fn=None, scope="fc")
    extra = tf.get_variable("extra", [3], initializer=tf.ones_initializer())
    tf.contrib.framework.add_model_variable(extra)
    return y
"""


def test_a_ported_graph_computes_what_tensorflow_1_did():
    ported = port_text(TF1_MODEL)
    assert "contrib" not in ported
    namespace: dict = {}
    exec(compile(ported, "model.py", "exec"), namespace)
    graph = tf.Graph()
    with graph.as_default():
        tf1 = tf.compat.v1
        x = tf1.placeholder(tf.float32, [None, 1000])
        y = namespace["model"](x)
        (weights,) = [v for v in tf1.global_variables() if v.name == "fc/weights:0"]
        (penalty,) = tf1.get_collection(tf1.GraphKeys.REGULARIZATION_LOSSES)
        model_variables = {v.name for v in tf1.get_collection(tf1.GraphKeys.MODEL_VARIABLES)}
        with tf1.Session(graph=graph) as sess:
            sess.run(tf1.global_variables_initializer())
            w, value, out = sess.run([weights, penalty, y], {x: np.ones([2, 1000], np.float32)})
    assert w.shape == (1000, 400)
    # l2_regularizer(scale)(w) is scale * sum(w ** 2) / 2 (tf.nn.l2_loss), not Keras' scale * sum(w ** 2).
    np.testing.assert_allclose(value, 0.01 * np.sum(w.astype(np.float64) ** 2) / 2, rtol=1e-5)
    # variance_scaling_initializer(): factor 2.0, fan_in, a normal truncated at two standard deviations
    # of stddev sqrt(1.3 * 2 / fan_in); what it draws has 0.8796 of that spread.
    stddev = np.sqrt(1.3 * 2.0 / 1000)
    assert np.abs(w).max() <= 2 * stddev + 1e-6
    np.testing.assert_allclose(w.std(), 0.87962566 * stddev, rtol=0.03)
    assert abs(w.mean()) < 0.05 * stddev
    np.testing.assert_allclose(out, np.ones([2, 1000]) @ w, rtol=1e-4, atol=1e-4)  # biases start at 0
    assert {"extra:0", "fc/weights:0", "fc/biases:0"} <= model_variables
