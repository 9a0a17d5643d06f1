"""What `towerpack port` reports for a person: names with no home, GPU-only assertions, and TensorFlow 1
names checked against the installed TensorFlow 2.21 (lines are those of the ported file)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import tensorflow as tf

from towerpack.port.cli import report
from towerpack.port.codemod import port_source
from towerpack.port.findings import Kind


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def found(code: str, path: str = "m.py") -> list[tuple[int, Kind, str]]:
    findings, notes = report([(path, port_source(code, path))])
    assert notes == []
    return [(f.line, f.kind, f.message) for f in findings]


TF = f"TensorFlow {tf.__version__}"

GPU_CODE = src(
    """
    import tensorflow as tf
    from tensorpack.utils.gpu import get_num_gpu

    NGPU = get_num_gpu()
    assert tf.test.is_gpu_available(), "needs GPUs"
    assert get_num_gpu() >= 1
    assert NGPU > 0
    assert NGPU % 8 == 0 or 8 % NGPU == 0
    assert len(tf.config.list_physical_devices("GPU")) > 0


    def train(cfg):
        n = get_num_gpu()
        assert n > 0, "Has to train with GPU!"
        assert cfg.NUM_GPUS == n
        assert not tf.test.is_gpu_available() or n > 0
    """
)


def test_assertions_that_fail_without_a_gpu_are_reported_and_others_are_not():
    lines = {(line, kind) for line, kind, _ in found(GPU_CODE)}
    assert lines == {
        (5, Kind.GPU_ONLY),
        (6, Kind.GPU_ONLY),
        (7, Kind.GPU_ONLY),
        (9, Kind.GPU_ONLY),
        (14, Kind.GPU_ONLY),
    }
    message = dict((line, m) for line, _, m in found(GPU_CODE))[14]
    assert message == (
        '`assert n > 0, "Has to train with GPU!"` fails on a machine without GPUs, where `n = get_num_gpu()` '
        "(line 13) is 0: change line 13 to `n = get_num_gpu() or 1` (one tower on a CPU; towerpack runs more "
        "on logical CPU devices)"
    )


def test_names_and_modules_with_no_home_stay_and_are_reported_at_their_ported_lines():
    code = src(
        """
        from tensorpack.dataflow import BatchData, CaffeLMDB, MapData
        import tensorpack as tp
        import tensorpack.libinfo
        from tensorpack.nothing_here import x

        q = tp.BatchQueueInput(tp.QueueInput)
        """
    )
    ported = port_source(code, "m.py")
    assert ported.text(ported.source) == src(
        """
        from towerpack.dataflow import BatchData, MapData
        from tensorpack.dataflow import CaffeLMDB
        import towerpack.trainer as tp
        import tensorpack.libinfo
        from tensorpack.nothing_here import x

        q = tp.BatchQueueInput(tp.QueueInput)
        """
    )
    assert found(code) == [
        (
            2,
            Kind.NO_HOME,
            "tensorpack.dataflow.CaffeLMDB has no home in towerpack: read with LMDBDataDecoder and your own "
            "decoder",
        ),
        (
            4,
            Kind.NO_HOME,
            "tensorpack.libinfo has no home in towerpack: read versions with "
            "importlib.metadata.version('towerpack-trainer')",
        ),
        (
            5,
            Kind.NO_HOME,
            "tensorpack.nothing_here is not a module of the reference (tensorpack 0.11): port this import "
            "by hand",
        ),
        (
            7,
            Kind.NO_HOME,
            "tp.BatchQueueInput has no home in towerpack: batch in the DataFlow with BatchData and feed it "
            "with QueueInput",
        ),
    ]


def test_tensorflow_1_names_are_checked_against_tensorflow_2_21():
    code = src(
        """
        import tensorflow as tf
        import tensorflow.contrib.graph_editor as ge
        import tensorflow
        from tensorpack import tfv1

        x = tf.placeholder(tf.float32, [None, 3])
        y = tf.contrib.layers.embed_sequence  # the port rewrites contrib names that have an exact home
        z = tf.estimator.Estimator
        k = tf.keras.layers.Dense(3)
        n = tfv1.no_such_op
        q = tf.layers.conv2d(x, 3, 3)
        r = tf.layers.no_such_layer
        p = tensorflow.placeholder
        q2 = tf.layers.conv2d(x, 3, 3)
        from tensorflow import keras
        d = keras.layers.Dense(3), keras.layers.NoSuchLayer
        """
    )
    result = found(code)
    # tf.layers and tf.keras work: towerpack.trainer turns on Keras 2 where tf-keras is installed (here).
    assert [(line, kind) for line, kind, _ in result] == [
        (2, Kind.TF_CONTRIB),
        (7, Kind.TF_CONTRIB),
        (8, Kind.TF_REMOVED),
        (10, Kind.TF_REMOVED),
        (12, Kind.TF_REMOVED),
        (13, Kind.TF_REMOVED),
        (16, Kind.TF_REMOVED),
    ]
    messages = dict((line, m) for line, _, m in result)
    assert messages[2] == (
        "`tensorflow.contrib.graph_editor`: tf.contrib is gone from TensorFlow 2 (there is no "
        "tf.compat.v1.contrib); no maintained replacement is known for this module"
    )
    assert messages[8].startswith("`tf.estimator.Estimator`: tf.estimator was removed in TensorFlow 2.16")
    assert (
        messages[10]
        == f"`tfv1.no_such_op` (tf.compat.v1.no_such_op) is gone from {TF}, tf.compat.v1 included"
    )
    assert messages[12] == (
        f"`tf.layers.no_such_layer` (tf.compat.v1.layers.no_such_layer) does not exist in {TF}, "
        "not even with tf-keras"
    )
    assert messages[13] == f"`tensorflow.placeholder` is not in {TF}'s TF 2 API: use tf.compat.v1.placeholder"
    assert messages[16] == "`keras.layers.NoSuchLayer` is not in tf-keras"


def test_tf_layers_and_keras_without_tf_keras_name_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "tf_keras", None)  # as if tf-keras were not installed
    code = src(
        """
        import tensorflow as tf
        x = tf.placeholder(tf.float32, [None, 3])
        q = tf.layers.conv2d(x, 3, 3)
        q2 = tf.layers.conv2d(x, 3, 3)
        k = tf.keras.layers.Dense(3)
        """
    )
    assert found(code) == [
        (
            3,
            Kind.TF_LEGACY_KERAS,
            "`tf.layers.conv2d` (tf.compat.v1.layers.conv2d) needs Keras 2 in TensorFlow 2.21, and tf-keras "
            "is not installed here: install it (pip install --no-deps 'tf-keras==2.21.*'); towerpack.trainer "
            "then turns on TF_USE_LEGACY_KERAS; or use towerpack's layers (towerpack.trainer.models: Conv2D, "
            "FullyConnected, ...) (also line 4)",
        ),
        (
            5,
            Kind.TF_KERAS,
            "`tf.keras.layers.Dense`: tf.keras is Keras 3 in TensorFlow 2.21, which has no graph mode: "
            "install tf-keras (pip install --no-deps 'tf-keras==2.21.*'; towerpack.trainer then makes "
            "tf.keras Keras 2)",
        ),
    ]


def test_tf_layers_work_in_a_towerpack_process():
    # What the report leaves out where tf-keras is installed runs: towerpack.trainer turns on Keras 2,
    # even when TensorFlow was imported first.
    code = src(
        """
        import tensorflow.compat.v1 as tf
        from towerpack.trainer import SimpleTrainer
        y = tf.layers.dense(tf.placeholder(tf.float32, [None, 3]), 2)
        print(y.shape.as_list())
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "[None, 2]"


def test_a_name_tried_under_except_attribute_error_is_not_reported():
    """Code that already copes with a missing name (FasterRCNN's upsampling falls back to
    FixedUnPooling) needs nobody; the same name outside such a try, or under another except, does."""
    code = textwrap.dedent(
        """\
        import tensorflow as tf


        def upsample(x):
            try:
                return tf.compat.v2.image.resize_images(x, [4, 4])
            except AttributeError:
                return x


        def upsample_or_fail(x):
            try:
                return tf.compat.v2.image.resize_images(x, [4, 4])
            except ValueError:
                return x
        """
    )
    findings, _ = report([("up.py", port_source(code, "up.py"))])
    assert [(f.line, f.kind) for f in findings] == [(13, Kind.TF_REMOVED)]


def test_a_package_only_the_reference_installed_is_named_where_it_is_missing():
    code = "import six\nimport msgpack_numpy as mn\nfrom msgpack_numpy import patch\n"
    findings = port_source(code, "deps.py").findings
    assert [(f.line, f.kind) for f in findings] == [
        (2, Kind.MISSING_DEPENDENCY),
        (3, Kind.MISSING_DEPENDENCY),
    ]
    assert findings[0].message.endswith("(pip install msgpack-numpy)")
