"""ModelExporter: a frozen graph and a SavedModel, loaded by TensorFlow alone in a fresh process,
give the outputs of the trainer's own predictor."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from support.procs import run_python
from support.trainer_models import ArrayBatches, SoftmaxClassifier, blobs
from towerpack.trainer import (
    Callback,
    ModelSaver,
    PredictConfig,
    SimpleTrainer,
    SmartInit,
    TrainConfig,
    get_current_tower_context,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf
from towerpack.trainer.export import ModelExporter

pytestmark = pytest.mark.usefixtures("graph")


class DropoutClassifier(SoftmaxClassifier):
    """Dropout on the inputs while training only: the export must build the inference graph."""

    def build_graph(self, x, label):
        if get_current_tower_context().is_training:
            x = tf.nn.dropout(x, rate=0.5)
        return super().build_graph(x, label)


class PredictAfterTraining(Callback):
    def __init__(self, x):
        self.x = x

    def _setup_graph(self):
        self.predictor = self.trainer.get_predictor(["x"], ["prob"])

    def _after_train(self):
        (self.prob,) = self.predictor(self.x)


# TensorFlow only: no towerpack in the process that loads the exports.
LOAD_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tensorflow as tf

    tfv1 = tf.compat.v1
    tfv1.disable_eager_execution()
    compact, serving, data, out = sys.argv[1:]
    x = np.load(data)

    with tf.Graph().as_default() as graph, tfv1.Session() as sess:
        graph_def = tfv1.GraphDef.FromString(open(compact, "rb").read())
        stateful = [n.op for n in graph_def.node if n.op in ("VarHandleOp", "VariableV2", "Placeholder")]
        tfv1.import_graph_def(graph_def, name="")
        frozen = sess.run("prob:0", {"x:0": x})

    with tf.Graph().as_default(), tfv1.Session() as sess:
        meta = tfv1.saved_model.loader.load(sess, ["serve"], serving)
        signature = meta.signature_def["prediction_pipeline"]
        assert signature.method_name == "tensorflow/serving/predict", signature.method_name
        feed = {signature.inputs["x:0"].name: x}
        saved = sess.run(signature.outputs["prob:0"].name, feed)
        names = sorted(signature.inputs) + sorted(signature.outputs)

    np.savez(out, frozen=frozen, saved=saved)
    print("stateful:", stateful)
    print("signature:", names)
    """
)


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
def test_exports_load_with_tensorflow_alone_and_match_the_trainers_predictor(logdir, tmp_path):
    x, label = blobs(128)
    probe = PredictAfterTraining(x[:16])
    config = TrainConfig(
        model=DropoutClassifier(),
        dataflow=ArrayBatches(x, label, batch_size=32),
        callbacks=[ModelSaver(), probe],
        max_epoch=2,
        monitors=[],
    )
    launch_train_with_config(config, SimpleTrainer())
    with tf.Graph().as_default():
        exporter = ModelExporter(
            PredictConfig(
                model=DropoutClassifier(),
                input_names=["x"],
                output_names=["prob"],
                session_init=SmartInit(str(logdir)),
            )
        )
        exporter.export_compact(str(tmp_path / "compact.pb"))
        exporter.export_serving(str(tmp_path / "serving"))
        with pytest.raises(FileExistsError, match="exists"):
            exporter.export_serving(str(tmp_path / "serving"))
    assert (tmp_path / "serving" / "saved_model.pb").is_file() and (
        tmp_path / "serving" / "variables"
    ).is_dir()
    np.save(tmp_path / "x.npy", x[:16])
    paths = [str(tmp_path / n) for n in ("compact.pb", "serving", "x.npy", "out.npz")]
    out = run_python(LOAD_SCRIPT, *paths, timeout=90).stdout
    assert "stateful: ['Placeholder']" in out  # the variables became constants
    assert "signature: ['x:0', 'prob:0']" in out
    with np.load(tmp_path / "out.npz") as f:
        np.testing.assert_allclose(f["frozen"], probe.prob, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(f["saved"], probe.prob, rtol=1e-6, atol=1e-7)
    assert not np.allclose(probe.prob, 1 / 3)  # it trained


def test_export_compact_rejects_toco_without_optimize(tmp_path):
    exporter = ModelExporter(
        PredictConfig(model=SoftmaxClassifier(), input_names=["x"], output_names=["prob"])
    )
    with pytest.raises(ValueError, match="toco_compatible needs optimize"):
        exporter.export_compact(str(tmp_path / "g.pb"), optimize=False, toco_compatible=True)
    with pytest.raises(TypeError, match="PredictConfig"):
        ModelExporter(SoftmaxClassifier())
