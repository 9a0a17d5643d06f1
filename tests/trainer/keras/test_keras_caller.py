"""KerasModelCaller in a ModelDesc (predictors, checkpoints, regularizers, frozen layers, a model
called twice), KerasPhaseCallback for Keras models called directly, and the errors for
unsupported use."""

from __future__ import annotations

import numpy as np
import pytest
import tf_keras as keras

from support.dist_models import RankSlices
from support.keras_models import (
    INPUT_SIGNATURE,
    MOVING,
    TARGET_SIGNATURE,
    TRAINABLE,
    Snapshot,
    get_model,
    keras_data,
    numpy_forward,
)
from towerpack.trainer import (
    CallbackFactory,
    ModelDesc,
    ModelSaver,
    OfflinePredictor,
    PredictConfig,
    QueueInput,
    SimpleTrainer,
    SmartInit,
    SyncMultiGPUTrainerReplicated,
    TowerContext,
    TrainConfig,
    add_moving_summary,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.keras import KerasModelCaller, KerasPhaseCallback, setup_keras_trainer
from towerpack.trainer.models import regularize_cost_from_collection


class KerasDesc(ModelDesc):
    """A tensorpack-style model whose network is a Keras model called through KerasModelCaller."""

    def __init__(self, get_model=get_model):
        self.caller = KerasModelCaller(get_model)

    def inputs(self):
        return INPUT_SIGNATURE + TARGET_SIGNATURE

    def build_graph(self, x, y):
        prob = tf.identity(self.caller(x), name="prob")
        xent = tf.reduce_mean(keras.losses.categorical_crossentropy(y, prob), name="xent")
        reg = regularize_cost_from_collection()
        add_moving_summary(xent, reg)
        return tf.add(xent, reg, name="cost")

    def optimizer(self):
        return tfv1.train.AdamOptimizer(0.02)


def _config(model, callbacks, epochs=2):
    x, y = keras_data()
    return TrainConfig(
        model=model,
        dataflow=RankSlices(x, y, 16),
        callbacks=callbacks,
        monitors=[],
        max_epoch=epochs,
    )


def test_model_desc_with_caller_trains_saves_and_predicts(logdir):
    vx, _ = keras_data(32, seed=7)
    desc, snap, predicted = KerasDesc(), Snapshot(), []
    with tf.Graph().as_default():
        trainer = SimpleTrainer()
        config = _config(desc, [snap, ModelSaver()])
        trainer._setup_graph_from_config(config)
        reg = tfv1.get_collection(tfv1.GraphKeys.REGULARIZATION_LOSSES)
        assert [t.op.name for t in reg] == ["dense/kernel/Regularizer/mul"]
        predictor = trainer.get_predictor(["x"], ["prob"])
        predict = CallbackFactory(after_train=lambda _: predicted.append(predictor(vx)[0]))
        trainer.train_with_defaults(
            callbacks=[*config.callbacks, predict],
            monitors=[],
            steps_per_epoch=len(config.dataflow),
            max_epoch=2,
        )
    online = predicted[0]
    expected = numpy_forward(snap.after, vx)
    np.testing.assert_allclose(online, expected, rtol=1e-4, atol=1e-6)
    # The checkpoint holds the single-tower names; a predictor in a new graph (the same caller,
    # which builds a new model there) restores it and predicts the same.
    reader = tf.train.load_checkpoint(str(logdir))
    for name in TRAINABLE + MOVING:
        np.testing.assert_array_equal(reader.get_tensor(name), snap.after[name], err_msg=name)
    offline = OfflinePredictor(
        PredictConfig(
            model=desc, input_names=["x"], output_names=["prob"], session_init=SmartInit(str(logdir))
        )
    )
    try:
        np.testing.assert_allclose(offline(vx)[0], online, rtol=1e-5, atol=1e-7)
    finally:
        offline.close()


def _frozen_dense(x):
    model = get_model(x)
    model.get_layer("dense").trainable = False
    return model


def test_frozen_layers_stay_out_of_training_in_every_tower(graph):
    trainer = SyncMultiGPUTrainerReplicated(2)
    x, y = keras_data()
    trainer.setup_graph(
        INPUT_SIGNATURE + TARGET_SIGNATURE,
        QueueInput(RankSlices(x, y, 16)),
        KerasDesc(_frozen_dense).build_graph,
        lambda: tfv1.train.GradientDescentOptimizer(0.1),
    )
    trainable = sorted(v.op.name for v in tfv1.trainable_variables())
    expected = [n for n in TRAINABLE if not n.startswith("dense/")]
    assert trainable == sorted(expected + [f"tower1/{n}" for n in expected])
    assert "dense/kernel" in {v.op.name for v in tfv1.global_variables()}
    assert "tower1/dense/kernel" in {v.op.name for v in tfv1.local_variables()}


def test_a_second_call_in_the_same_tower_reuses_its_model(graph):
    caller = KerasModelCaller(get_model)
    a = tfv1.placeholder(tf.float32, [None, 6])
    b = tfv1.placeholder(tf.float32, [None, 6])
    with TowerContext("", is_training=True):
        caller(a)
        count = len(tfv1.global_variables())
        out = caller(b)
    assert len(tfv1.global_variables()) == count
    assert out.shape.as_list() == [None, 3]


def _direct_model_train(with_phase_callback: bool) -> dict:
    """Train a Keras model called directly (no caller) in the tower function; its update ops are
    added to UPDATE_OPS by hand, as the reference's Keras-in-ModelDesc example does."""
    snap = Snapshot()

    class Direct(KerasDesc):
        def build_graph(self, x, y):
            if not hasattr(self, "model"):
                self.model = keras.Sequential([keras.layers.BatchNormalization(name="bn")])
            out = self.model(x)
            for op in self.model.updates:
                tfv1.add_to_collection(tfv1.GraphKeys.UPDATE_OPS, op)
            w = tfv1.get_variable("w", [6, 3])
            return tf.reduce_mean(tf.square(tf.matmul(out, w) - y), name="cost")

    callbacks = [snap] + ([KerasPhaseCallback(True)] if with_phase_callback else [])
    with tf.Graph().as_default():
        launch_train_with_config(_config(Direct(), callbacks, epochs=1), SimpleTrainer())
    return snap.after


def test_phase_callback_trains_keras_models_called_without_training_flag():
    assert np.all(_direct_model_train(with_phase_callback=True)["sequential/bn/moving_mean"] != 0)
    # Without it the layers read the placeholder's default: inference mode, no statistics.
    assert np.all(_direct_model_train(with_phase_callback=False)["sequential/bn/moving_mean"] == 0)


def _setup(trainer, get_model, loss="categorical_crossentropy", optimizer=None):
    x, y = keras_data()
    setup_keras_trainer(
        trainer,
        get_model,
        INPUT_SIGNATURE,
        TARGET_SIGNATURE,
        QueueInput(RankSlices(x, y, 16)),
        optimizer or tfv1.train.GradientDescentOptimizer(0.1),
        loss,
        [],
    )


def test_a_cached_model_under_replicated_training_is_an_error(graph):
    cache = {}

    def cached(x):
        if "m" not in cache:
            cache["m"] = get_model(x)
        return cache["m"]

    with pytest.raises(ValueError, match="must build a new model every time it is called"):
        _setup(SyncMultiGPUTrainerReplicated(2), cached)


def test_a_keras_3_model_is_refused_with_an_explanation(graph):
    import keras as keras3

    with pytest.raises(TypeError, match=r"Keras 3 .* has no graph mode: build the model with tf-keras"):
        _setup(SimpleTrainer(), lambda x: keras3.Sequential([keras3.layers.Dense(3)]))


def test_bad_keras_setups_are_refused(graph):
    with pytest.raises(ValueError, match=r"1 output\(s\), target_signature 1 target\(s\) and there are 2"):
        _setup(SimpleTrainer(), get_model, loss=["categorical_crossentropy", "mse"])
    with pytest.raises(TypeError, match=r"tf\.compat\.v1\.train\.Optimizer"):
        _setup(SimpleTrainer(), get_model, optimizer=keras.optimizers.Adam())
    with pytest.raises(RuntimeError, match="under a TowerContext"):
        KerasModelCaller(get_model)(tfv1.placeholder(tf.float32, [None, 6]))


def test_keras_layers_made_anew_in_a_reusing_tower_name_the_caller(graph):
    """What failed in every trainer before the caller: an inference tower building new layers."""
    x = tfv1.placeholder(tf.float32, [None, 6])
    with TowerContext("", is_training=True):
        keras.layers.Dense(3)(x)
    with (
        tfv1.variable_scope(tfv1.get_variable_scope(), reuse=True),
        pytest.raises(
            RuntimeError, match=r"variable\(s\): InferenceTower/dense_1/kernel:0.*KerasModelCaller"
        ),
        TowerContext("InferenceTower", is_training=False),
    ):
        keras.layers.Dense(3)(x)
