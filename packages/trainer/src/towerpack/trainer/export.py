"""ModelExporter: write a trained model in the formats TensorFlow's own tools load, for serving
or deployment without towerpack.

``export_compact`` writes one frozen ``GraphDef`` file (variables turned into constants);
``export_serving`` writes a SavedModel with a PREDICT signature. Both build the model from a
``PredictConfig`` exactly as ``OfflinePredictor`` does (the tower function under
``PredictTowerContext('')``, variables from ``session_init``).
"""

from __future__ import annotations

import os

from . import logger
from .compat import tf, tfv1
from .predict.base import build_prediction_tower, initialize_session
from .predict.config import PredictConfig
from .tower import TowerFunc

__all__ = ["ModelExporter"]


class ModelExporter:
    """Export the model described by ``config`` (its ``input_names`` and ``output_names`` are
    the exported graph's inputs and outputs)."""

    def __init__(self, config: PredictConfig):
        if not isinstance(config, PredictConfig):
            raise TypeError(f"ModelExporter takes a PredictConfig, got {type(config).__name__}")
        self.config = config

    def _build(self):
        """A new graph with the prediction tower and a session holding the variables' values."""
        graph = self.config._maybe_create_graph()
        with graph.as_default():
            inputs, outputs = build_prediction_tower(
                self.config, TowerFunc(self.config.tower_func, self.config.input_signature)
            )
            sess = initialize_session(self.config)
        return graph, sess, inputs, outputs

    def export_compact(self, filename: str, optimize: bool = True, toco_compatible: bool = False) -> None:
        """Write a frozen ``GraphDef`` (binary protobuf) with the variables as constants, keeping
        only what the outputs need. With ``optimize``, ``optimize_for_inference`` also folds
        batch normalization and removes training-only ops (``toco_compatible`` keeps the result
        convertible by TFLite's converter).

        Load it with ``tf.compat.v1.GraphDef.FromString(open(filename, 'rb').read())`` and
        ``tf.compat.v1.import_graph_def``; inputs and outputs keep their names.
        """
        if toco_compatible and not optimize:
            raise ValueError("toco_compatible needs optimize=True")
        graph, sess, inputs, outputs = self._build()
        try:
            with graph.as_default():
                frozen = tfv1.graph_util.convert_variables_to_constants(
                    sess, graph.as_graph_def(), [t.op.name for t in outputs]
                )
        finally:
            sess.close()
        if optimize:
            from tensorflow.python.tools import optimize_for_inference_lib

            frozen = optimize_for_inference_lib.optimize_for_inference(
                frozen,
                [t.op.name for t in inputs],
                [t.op.name for t in outputs],
                [t.dtype.as_datatype_enum for t in inputs],
                toco_compatible,
            )
        with tf.io.gfile.GFile(filename, "wb") as f:
            f.write(frozen.SerializeToString())
        logger.info("Output graph written to %s.", filename)

    def export_serving(self, filename: str, tags=None, signature_name: str = "prediction_pipeline") -> None:
        """Write a SavedModel (``saved_model.pb`` and ``variables/``) to the new directory
        ``filename``, tagged ``tags`` (default ``["serve"]``), with one PREDICT signature
        ``signature_name`` whose inputs and outputs are keyed by their tensor names (``x:0``).

        Load it with ``tf.compat.v1.saved_model.loader.load(sess, tags, filename)`` (or serve it
        with TensorFlow Serving).
        """
        if os.path.exists(filename):
            raise FileExistsError(f"export_serving writes a new directory; {filename} exists")
        tags = list(tags) if tags is not None else [tfv1.saved_model.tag_constants.SERVING]
        graph, sess, inputs, outputs = self._build()
        try:
            with graph.as_default():
                info = tfv1.saved_model.utils.build_tensor_info
                signature = tfv1.saved_model.signature_def_utils.build_signature_def(
                    inputs={t.name: info(t) for t in inputs},
                    outputs={t.name: info(t) for t in outputs},
                    method_name=tfv1.saved_model.signature_constants.PREDICT_METHOD_NAME,
                )
                builder = tfv1.saved_model.Builder(filename)
                builder.add_meta_graph_and_variables(
                    sess,
                    tags,
                    signature_def_map={signature_name: signature},
                    main_op=tfv1.tables_initializer(),
                )
                builder.save()
        finally:
            sess.close()
        logger.info("SavedModel written to %s.", filename)
