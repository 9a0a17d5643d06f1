"""Predictors: online predictors on the trainer's variables, offline predictors from a checkpoint."""

import numpy as np
import pytest

from support.trainer_models import ArrayBatches, SoftmaxClassifier, blobs
from towerpack.trainer import (
    Callback,
    ModelSaver,
    OfflinePredictor,
    PredictConfig,
    SimpleTrainer,
    SmartInit,
    TrainConfig,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf, tfv1

pytestmark = pytest.mark.usefixtures("graph")


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


class Compare(Callback):
    """At the end of every epoch: predictor output vs a direct run of the training tower vs numpy."""

    def __init__(self, x):
        self.x = x
        self.results = []

    def _setup_graph(self):
        self.pred = self.trainer.get_predictor(["x"], ["prob"])

    def _trigger(self):
        t = self.trainer.towers[0]
        (pred,) = self.pred(self.x)
        direct = self.trainer.sess.run(t.get_tensor("prob"), {t.get_tensor("x"): self.x})
        w, b = self.trainer.sess.run([t.get_variable("W"), t.get_variable("b")])
        self.results.append((pred, direct, softmax(self.x @ w + b)))


def train(x, label, callbacks, max_epoch=2):
    trainer = SimpleTrainer()
    config = TrainConfig(
        model=SoftmaxClassifier(),
        dataflow=ArrayBatches(x, label, batch_size=32),
        callbacks=callbacks,
        max_epoch=max_epoch,
        monitors=[],
    )
    launch_train_with_config(config, trainer)
    return trainer


def test_online_predictor_equals_a_direct_session_run():
    x, label = blobs(128)
    cmp = Compare(x[:20])
    trainer = train(x, label, [cmp])
    for pred, direct, expected in cmp.results:
        np.testing.assert_array_equal(pred, direct)
        np.testing.assert_allclose(pred, expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(cmp.results[0][0], cmp.results[1][0])  # weights moved between epochs
    # The prediction tower reuses the training variables and adds no trainable ones.
    assert sorted(v.op.name for v in tfv1.trainable_variables()) == ["W", "b"]
    assert [h.ns_name for h in trainer.towers] == ["", "tower-pred-0"]
    assert trainer.vs_name_for_predictor == ""


def test_get_predictors_share_one_cpu_tower_without_gpus():
    x, label = blobs(64)
    preds = []

    class Make(Callback):
        def _setup_graph(self):
            preds.extend(self.trainer.get_predictors(["x"], ["prob"], 3))

        def _trigger(self):
            self.out = [p(x[:4])[0] for p in preds]

    make = Make()
    trainer = train(x, label, [make], max_epoch=1)
    assert len(preds) == 3
    assert "tower-pred-cpu" in [h.ns_name for h in trainer.towers]
    for out in make.out[1:]:
        np.testing.assert_array_equal(out, make.out[0])


def test_older_get_predictor_tower_is_an_index_into_predict_tower():
    """The reference: ``tower=k`` is the k-th entry of ``TrainConfig.predict_tower`` (-1 = CPU)."""
    x, label = blobs(64)

    class Make(Callback):
        def _setup_graph(self):
            self.pred = self.trainer.get_predictor(["x"], ["prob"], tower=0)
            with pytest.raises(IndexError, match=r"tower=1: TrainConfig\(predict_tower=\[-1\]\)"):
                self.trainer.get_predictor(["x"], ["prob"], tower=1)

    config = TrainConfig(
        model=SoftmaxClassifier(),
        dataflow=ArrayBatches(x, label, batch_size=32),
        callbacks=[Make()],
        max_epoch=1,
        monitors=[],
        predict_tower=[-1],
    )
    trainer = SimpleTrainer(config)
    trainer.train()
    assert [h.ns_name for h in trainer.towers] == ["", "tower-pred-cpu"]


def test_offline_predictor_from_a_checkpoint_matches_the_trainer(logdir):
    x, label = blobs(128)
    cmp = Compare(x[:20])
    train(x, label, [cmp, ModelSaver()])
    with tf.Graph().as_default():
        config = PredictConfig(
            model=SoftmaxClassifier(),
            input_names=["x", "label"],
            output_names=["prob", "accuracy"],
            session_init=SmartInit(str(logdir)),
        )
        pred = OfflinePredictor(config)
    prob, accuracy = pred(x[:20], label[:20])
    np.testing.assert_allclose(prob, cmp.results[-1][0], rtol=1e-6)
    assert accuracy == pytest.approx((prob.argmax(axis=1) == label[:20]).mean())
    pred.close()


def test_predictor_tower_must_be_built_before_training():
    x, label = blobs(64)
    trainer = train(x, label, [], max_epoch=1)
    with pytest.raises(RuntimeError, match="before training starts"):
        trainer.get_predictor(["x"], ["prob"])


def test_predict_config_needs_outputs():
    with pytest.raises(ValueError, match="output_names"):
        PredictConfig(model=SoftmaxClassifier(), input_names=["x"])
