"""ModelDesc's reference attributes a model reads: ``training``, ``input_names``, the input and
optimizer getters (old names included), and ``logger._logger``."""

from __future__ import annotations

import logging
import unittest

import numpy as np
import pytest

from support.trainer_models import ArrayBatches, LinearRegression, linear_data
from towerpack.trainer import (
    InferenceRunner,
    ModelDesc,
    OfflinePredictor,
    PredictConfig,
    PredictTowerContext,
    ScalarStats,
    SimpleTrainer,
    TowerContext,
    TrainConfig,
    TrainTowerContext,
    launch_train_with_config,
    logger,
)
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.model_desc import InputDesc, build_placeholders

pytestmark = pytest.mark.usefixtures("graph")


class RecordsTraining(LinearRegression):
    """Records ``self.training`` at every build; its ``pred`` doubles in training towers."""

    def __init__(self):
        super().__init__(dim=2)
        self.seen: list[bool] = []

    def build_graph(self, x, y):
        self.seen.append(self.training)
        cost = super().build_graph(x, y)
        tf.identity(tf.constant(2.0 if self.training else 1.0), name="scale")
        return cost


def test_training_follows_the_tower_context():
    model = RecordsTraining()
    assert model.training is False  # outside any tower
    with TowerContext("", is_training=True):
        assert model.training is True
    with TrainTowerContext("tower1", index=1, total=2):
        assert model.training is True
    with PredictTowerContext("pred"):
        assert model.training is False
    with TowerContext("infer", is_training=False):
        assert model.training is False
    assert model.training is False


def test_training_in_a_trainer_and_its_predictors(logdir):
    x, y, _ = linear_data(n=32, dim=2)
    model = RecordsTraining()
    config = TrainConfig(
        model=model,
        dataflow=ArrayBatches(x, y, batch_size=8),
        callbacks=[InferenceRunner(ArrayBatches(x, y, batch_size=8), ScalarStats("cost"))],
        steps_per_epoch=2,
        max_epoch=1,
    )
    launch_train_with_config(config, SimpleTrainer())
    assert model.seen == [True, False]  # the training tower, then InferenceRunner's tower

    with tf.Graph().as_default():
        pred = OfflinePredictor(PredictConfig(model=model, input_names=["x"], output_names=["scale"]))
        (scale,) = pred(np.zeros((1, 2), np.float32))
    assert model.seen == [True, False, False]
    assert float(scale) == 1.0


class OldStyle(ModelDesc):
    def inputs(self):
        return [
            tfv1.placeholder(tf.float32, (None, 3), "image"),
            tfv1.placeholder(tf.int32, (None,), "label"),
        ]

    def optimizer(self):
        return tfv1.train.GradientDescentOptimizer(0.1)


def test_input_names_signature_and_optimizer_getters():
    model = OldStyle()
    assert model.input_names == ["image", "label"]
    for sig in (model.get_input_signature(), model.get_inputs_desc()):
        assert [(s.name, s.dtype, s.shape.as_list()) for s in sig] == [
            ("image", tf.float32, [None, 3]),
            ("label", tf.int32, [None]),
        ]
    # the placeholders of inputs() went into a throw-away graph, not the default one
    assert not tfv1.get_default_graph().get_operations()
    assert model.get_optimizer() is model.get_optimizer()


class Legacy(ModelDesc):
    """The older API: ``_get_inputs``, ``_build_graph`` setting ``self.cost``, ``_get_optimizer``."""

    def _get_inputs(self):
        return [InputDesc(tf.float32, (None, 2), "x"), InputDesc(tf.float32, (None,), "y")]

    regularizer = None

    def _build_graph(self, inputs):
        x, y = inputs
        w = tfv1.get_variable("w", [2], initializer=tfv1.ones_initializer(), regularizer=self.regularizer)
        pred = tf.linalg.matvec(x, w, name="pred")
        if self.training:
            self.cost = tf.reduce_mean(tf.square(pred - y), name="cost")

    def _get_optimizer(self):
        return tfv1.train.GradientDescentOptimizer(0.5)


def test_older_api_forms():
    model = Legacy()
    assert [(s.name, s.shape.as_list()) for s in model.get_input_signature()] == [
        ("x", [None, 2]),
        ("y", [None]),
    ]
    x, y = build_placeholders(model.get_input_signature())
    with TowerContext("", is_training=True):
        cost = model.build_graph(x, y)
    assert cost.op.name == "cost"
    with TowerContext("infer", is_training=False), tfv1.variable_scope("", reuse=True):
        assert model.build_graph(x, y) is None  # the training tower's cost is not handed out again
    opt = model.get_optimizer()
    assert isinstance(opt, tfv1.train.GradientDescentOptimizer) and opt is model.get_optimizer()
    train_op = opt.minimize(cost)
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        feed = {x: [[1.0, 2.0]], y: [1.0]}
        assert sess.run(cost, feed) == pytest.approx(4.0)  # (1 + 2 - 1) ** 2
        sess.run(train_op, feed)  # w -= 0.5 * 2 * 2 * [1, 2]
        np.testing.assert_allclose(sess.run(tfv1.trainable_variables()[0]), [-1.0, -3.0])


def test_older_api_cost_gets_the_regularization_collection(caplog):
    model = Legacy()
    model.regularizer = lambda w: tf.multiply(0.5, tf.reduce_sum(w * w), name="l2")
    x, y = build_placeholders(model.get_input_signature())
    with TowerContext("", is_training=True):
        cost = model.build_graph(x, y)
    assert cost.op.name == "cost_with_regularizer"
    assert "REGULARIZATION_LOSSES is not empty" in caplog.text
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        assert sess.run(cost, {x: [[1.0, 2.0]], y: [1.0]}) == pytest.approx(4.0 + 0.5 * 2)


def test_missing_methods_are_named():
    model = ModelDesc()
    with pytest.raises(NotImplementedError, match=r"ModelDesc must implement inputs\(\)"):
        model.get_input_signature()
    with pytest.raises(NotImplementedError, match=r"must implement build_graph\(\)"):
        model.build_graph()
    with pytest.raises(NotImplementedError, match=r"must implement optimizer\(\)"):
        model.get_optimizer()


def test_input_desc_names_are_checked():
    class BadName(ModelDesc):
        def _get_inputs(self):
            return [InputDesc(tf.float32, (None,), "a/b")]

    with pytest.raises(ValueError, match="'a/b' must not contain"):
        BadName().get_input_signature()


def test_logger_private_name_is_the_logging_logger():
    assert isinstance(logger._logger, logging.Logger)
    with pytest.raises(AssertionError), _assert_logs():  # assertLogs fails when nothing is logged
        pass
    with _assert_logs() as cm:
        logger.warning("careful: %d", 3)
    assert cm.output == [f"WARNING:{logger._logger.name}:careful: 3"]


def _assert_logs():
    return unittest.TestCase().assertLogs(logger=logger._logger, level="WARNING")
