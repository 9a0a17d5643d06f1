"""A channels_first ResNet trained on a CPU predicts and exports there, with the outputs its
weights give in any layout: OfflinePredictor, the channels_last twin of the model, a SavedModel
and a frozen graph loaded by TensorFlow alone with oneDNN off, and the graph a GPU would run
(native NCHW ops, which a CPU runs only with oneDNN on)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import numpy as np
import pytest

from support.procs import run_python
from support.trainer_models import ArrayBatches
from towerpack.trainer import (
    AvgPooling,
    BatchNorm,
    Conv2D,
    Conv2DTranspose,
    FullyConnected,
    GlobalAvgPooling,
    MaxPooling,
    ModelDesc,
    ModelSaver,
    OfflinePredictor,
    PredictConfig,
    SimpleTrainer,
    SmartInit,
    TrainConfig,
    argscope,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.export import ModelExporter

pytestmark = [pytest.mark.data_format, pytest.mark.slow, pytest.mark.usefixtures("graph")]

SIZE, CLASSES = 16, 4


class SmallResNet(ModelDesc):
    """NHWC images in; the layers run in ``data_format`` (the reference's models transpose once)."""

    def __init__(self, data_format: str):
        self.data_format = data_format

    def inputs(self):
        return [
            tf.TensorSpec([None, SIZE, SIZE, 3], tf.float32, "image"),
            tf.TensorSpec([None], tf.int32, "label"),
        ]

    def build_graph(self, image, label):
        first = self.data_format == "channels_first"
        x = tf.transpose(image, [0, 3, 1, 2]) if first else image
        layers = [Conv2D, Conv2DTranspose, BatchNorm, MaxPooling, AvgPooling, GlobalAvgPooling]
        with argscope(layers, data_format=self.data_format), argscope(Conv2D, use_bias=False):
            x = tf.nn.relu(BatchNorm("bn0", Conv2D("conv0", x, 8, 3)))
            x = MaxPooling("pool0", x, 2)
            shortcut = x
            x = tf.nn.relu(BatchNorm("bn1", Conv2D("conv1", x, 8, 3)))
            x = BatchNorm("bn2", Conv2D("conv2", x, 8, 3, dilation_rate=2)) + shortcut
            x = Conv2DTranspose("up", tf.nn.relu(x), 8, 3, 2)
            x = AvgPooling("pool1", x, 2)
            x = GlobalAvgPooling("gap", x)
        logits = FullyConnected("fc", x, CLASSES)
        tf.nn.softmax(logits, name="prob")
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=logits))

    def optimizer(self):
        return tfv1.train.MomentumOptimizer(0.05, 0.9)


def images(n: int, seed: int):
    """Images whose class is the quadrant holding a bright square."""
    rng = np.random.RandomState(seed)
    x = rng.uniform(0, 0.3, (n, SIZE, SIZE, 3)).astype(np.float32)
    label = rng.randint(CLASSES, size=n).astype(np.int32)
    half = SIZE // 2
    for img, k in zip(x, label, strict=True):
        r, c = (k // 2) * half, (k % 2) * half
        img[r + 2 : r + half - 2, c + 2 : c + half - 2] += 0.7
    return x, label


def predict(data_format: str, checkpoint: str, x):
    with tf.Graph().as_default():
        config = PredictConfig(
            model=SmallResNet(data_format),
            input_names=["image"],
            output_names=["prob"],
            session_init=SmartInit(checkpoint),
        )
        return OfflinePredictor(config)(x)[0]


# TensorFlow alone, oneDNN off: the frozen graph and the SavedModel.
LOAD_EXPORTS = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.util import _pywrap_util_port

    assert not _pywrap_util_port.IsMklEnabled(), "oneDNN is on"
    tfv1 = tf.compat.v1
    tfv1.disable_eager_execution()
    compact, serving, data, out = sys.argv[1:]
    x = np.load(data)
    with tf.Graph().as_default(), tfv1.Session() as sess:
        tfv1.import_graph_def(tfv1.GraphDef.FromString(open(compact, "rb").read()), name="")
        frozen = sess.run("prob:0", {"image:0": x})
    with tf.Graph().as_default(), tfv1.Session() as sess:
        meta = tfv1.saved_model.loader.load(sess, ["serve"], serving)
        signature = meta.signature_def["prediction_pipeline"]
        saved = sess.run(signature.outputs["prob:0"].name, {signature.inputs["image:0"].name: x})
    np.savez(out, frozen=frozen, saved=saved)
    """
)

# The graph a GPU runs (native NCHW ops), run on this CPU with oneDNN on.
NATIVE_NCHW = textwrap.dedent(
    """
    import sys
    import numpy as np
    from towerpack.trainer import OfflinePredictor, PredictConfig, SmartInit
    from towerpack.trainer.compat import tf
    from towerpack.trainer import cpu_kernels
    from test_channels_first_on_cpu import SmallResNet

    cpu_kernels.get_num_gpu = lambda: 1  # build as on a machine with a GPU
    checkpoint, data, out = sys.argv[1:]
    config = PredictConfig(model=SmallResNet("channels_first"), input_names=["image"],
                           output_names=["prob"], session_init=SmartInit(checkpoint))
    predictor = OfflinePredictor(config)
    ops = predictor.sess.graph.get_operations()
    assert not [op for op in ops if op.type == "Transpose" and "to_nhwc" in op.name], "CPU path used"
    assert {op.get_attr("data_format") for op in ops if op.type in ("Conv2D", "MaxPool")} == {b"NCHW"}
    np.save(out, predictor(np.load(data))[0])
    """
)


@pytest.mark.multiprocess
@pytest.mark.timeout(240)
def test_channels_first_resnet_trains_predicts_and_exports_on_cpu(logdir, tmp_path):
    tfv1.set_random_seed(2)  # 32 steps: an unlucky initialisation may not learn yet
    x, label = images(256, seed=0)
    test_x, test_label = images(64, seed=1)
    config = TrainConfig(
        model=SmallResNet("channels_first"),
        dataflow=ArrayBatches(x, label, batch_size=32, shuffle=True),
        callbacks=[ModelSaver()],
        max_epoch=4,
        monitors=[],
    )
    launch_train_with_config(config, SimpleTrainer())
    checkpoint = str(logdir)

    first = predict("channels_first", checkpoint, test_x)
    assert (first.argmax(1) == test_label).mean() > 0.5  # it learned (chance: 0.25)
    last = predict("channels_last", checkpoint, test_x)
    np.testing.assert_allclose(first, last, rtol=1e-4, atol=1e-5)

    with tf.Graph().as_default():
        exporter = ModelExporter(
            PredictConfig(
                model=SmallResNet("channels_first"),
                input_names=["image"],
                output_names=["prob"],
                session_init=SmartInit(checkpoint),
            )
        )
        exporter.export_compact(str(tmp_path / "compact.pb"))
        exporter.export_serving(str(tmp_path / "serving"))
    np.save(tmp_path / "x.npy", test_x)
    paths = [str(tmp_path / n) for n in ("compact.pb", "serving", "x.npy", "exports.npz")]
    run_python(LOAD_EXPORTS, *paths, timeout=90, env={"TF_ENABLE_ONEDNN_OPTS": "0"})
    with np.load(tmp_path / "exports.npz") as f:
        np.testing.assert_allclose(f["frozen"], first, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(f["saved"], first, rtol=1e-4, atol=1e-5)

    run_python(
        NATIVE_NCHW,
        checkpoint,
        str(tmp_path / "x.npy"),
        str(tmp_path / "native.npy"),
        timeout=120,
        env={"TF_ENABLE_ONEDNN_OPTS": "1", "PYTHONPATH": _test_paths()},
    )
    np.testing.assert_allclose(np.load(tmp_path / "native.npy"), first, rtol=1e-4, atol=1e-5)


def _test_paths() -> str:
    """This file's directory (the model) and tests/ (its support imports), for a subprocess."""
    here = Path(__file__).resolve().parent
    return os.pathsep.join([str(here), str(here.parent), os.environ.get("PYTHONPATH", "")])


# A model that calls TensorFlow's NCHW ops itself (as the reference's ShuffleNet does), trained or
# used by a predictor; argv: the mode.
DIRECT_NCHW = textwrap.dedent(
    """
    import sys
    import numpy as np
    from towerpack.trainer import (Callback, ModelDesc, OfflinePredictor, PredictConfig, SimpleTrainer,
                                   TrainConfig, launch_train_with_config)
    from towerpack.trainer.compat import tf, tfv1

    class DepthwiseNet(ModelDesc):
        def inputs(self):
            return [tf.TensorSpec([None, 3, 8, 8], tf.float32, "x")]

        def build_graph(self, x):
            w = tfv1.get_variable("w", [3, 3, 3, 1], initializer=tfv1.constant_initializer(0.5))
            y = tf.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "SAME", data_format="NCHW")
            y = tf.nn.max_pool2d(y, 2, 2, "VALID", data_format="NCHW")
            return tf.reduce_mean(tf.square(y), name="cost")

        def optimizer(self):
            return tfv1.train.GradientDescentOptimizer(0.01)

    class Points:
        def __len__(self):
            return 2
        def __iter__(self):
            for k in range(2):
                yield [np.linspace(0, 1, 4 * 3 * 64).reshape(4, 3, 8, 8).astype(np.float32) + k]
        def reset_state(self):
            pass

    class Report(Callback):
        def _setup_graph(self):
            (self.w,) = tfv1.trainable_variables()

        def _after_train(self):
            print("trained", self.trainer.sess.run(self.w).sum())

    mode = sys.argv[1]
    if mode.startswith("train"):
        session = tfv1.ConfigProto()
        if mode == "train_without_grappler":
            session.graph_options.rewrite_options.disable_meta_optimizer = True
        config = TrainConfig(model=DepthwiseNet(), dataflow=Points(), max_epoch=1, callbacks=[Report()],
                             monitors=[], session_config=session)
        launch_train_with_config(config, SimpleTrainer())
    else:
        output = "cost" if mode == "predict" else "MaxPool2d"  # the raw op's own output
        config = PredictConfig(model=DepthwiseNet(), input_names=["x"], output_names=[output])
        predictor = OfflinePredictor(config)
        print("predicted", predictor(np.linspace(0, 1, 192).reshape(1, 3, 8, 8).astype(np.float32))[0].sum())
    """
)


def _last_number(out: str) -> float:
    return float(out.strip().splitlines()[-1].split()[-1])


@pytest.mark.multiprocess
@pytest.mark.timeout(240)
def test_direct_nchw_ops_run_without_onednn_through_grappler_in_towerpacks_sessions():
    # TensorFlow's NCHW kernels need oneDNN on a CPU; towerpack's sessions let Grappler rewrite the
    # ops (forward and backward) into NHWC, so the results are those of oneDNN's NCHW kernels.
    for mode in ("train", "predict"):
        off = run_python(DIRECT_NCHW, mode, timeout=90, env={"TF_ENABLE_ONEDNN_OPTS": "0"})
        on = run_python(DIRECT_NCHW, mode, timeout=90, env={"TF_ENABLE_ONEDNN_OPTS": "1"})
        np.testing.assert_allclose(_last_number(off.stdout), _last_number(on.stdout), rtol=1e-5)


@pytest.mark.multiprocess
@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("predict_raw_output", "these are fetched themselves, which Grappler's conversion leaves alone"),
        ("train_without_grappler", "oneDNN, which has NCHW CPU kernels, is off here"),
    ],
)
def test_direct_nchw_ops_a_cpu_cannot_run_are_named_before_the_session_runs(mode, why):
    off = run_python(DIRECT_NCHW, mode, timeout=90, check=False, env={"TF_ENABLE_ONEDNN_OPTS": "0"})
    assert off.returncode != 0
    assert "cpu_kernels.CpuLayoutError: the graph has channels_first" in off.stderr, off.stderr[-3000:]
    assert why in off.stderr
    # The op, and the line of the model code that made it (line 15 of the script).
    assert "MaxPool 'MaxPool2d', created at <string>:15" in off.stderr
    assert "TF_ENABLE_ONEDNN_OPTS=1" in off.stderr
    assert "Graph execution error" not in off.stderr  # stopped before any step ran
    on = run_python(DIRECT_NCHW, mode, timeout=90, env={"TF_ENABLE_ONEDNN_OPTS": "1"})
    assert on.stdout.strip().splitlines()[-1].split()[0] in ("trained", "predicted")
