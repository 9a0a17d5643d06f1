"""KerasModel(...).compile(...).fit(...) with a real tf-keras model under every in-process trainer:
it trains, its BatchNormalization statistics move, the inference tower predicts with the trained
variables (checked against a numpy forward pass), replicas stay equal, shared towers share."""

from __future__ import annotations

import json

import numpy as np
import pytest

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
    AsyncMultiGPUTrainer,
    JSONWriter,
    QueueInput,
    SimpleTrainer,
    SyncMultiGPUTrainerParameterServer,
    SyncMultiGPUTrainerReplicated,
)
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.keras import KerasModel

BATCH, EPOCHS = 16, 3
STATS = ("categorical_crossentropy", "categorical_accuracy", "total_loss", "regularize_cost")


TRAINERS = {
    "simple-feed": (lambda: None, lambda df: df),  # KerasModel's default: SimpleTrainer without GPUs
    "simple-queue": (lambda: SimpleTrainer(), QueueInput),
    "replicated": (lambda: SyncMultiGPUTrainerReplicated(2, broadcast_every_epoch=False), QueueInput),
    "parameter-server": (lambda: SyncMultiGPUTrainerParameterServer(2, ps_device="cpu"), QueueInput),
    "async": (lambda: AsyncMultiGPUTrainer(2), QueueInput),
}


@pytest.mark.parametrize("kind", list(TRAINERS))
def test_keras_model_trains_and_predicts(kind, logdir):
    make_trainer, make_input = TRAINERS[kind]
    x, y = keras_data()
    vx, vy = keras_data(64, seed=7)
    snap = Snapshot()
    with tf.Graph().as_default():
        trainer = make_trainer()
        model = KerasModel(
            get_model,
            INPUT_SIGNATURE,
            TARGET_SIGNATURE,
            input=make_input(RankSlices(x, y, BATCH)),
            trainer=trainer,
        )
        model.compile(tfv1.train.AdamOptimizer(0.02), "categorical_crossentropy", "categorical_accuracy")
        assert isinstance(model.trainer, SimpleTrainer) if trainer is None else model.trainer is trainer
        steps = len(x) // (BATCH * (len(model.trainer.devices) or 1))  # no devices: one tower
        # Without steps_per_epoch, fit() takes the input's size (one tower here).
        given = {} if kind == "simple-feed" else {"steps_per_epoch": steps}
        model.fit(
            validation_data=RankSlices(vx, vy, 16),
            callbacks=[snap],
            monitors=[JSONWriter()],
            max_epoch=EPOCHS,
            **given,
        )
    before, after = snap.before, snap.after
    stats = json.loads((logdir / "stats.json").read_text())
    assert len(stats) == EPOCHS and after["global_step"] == EPOCHS * steps
    for key in STATS + tuple(f"validation_{s}" for s in ("categorical_crossentropy", "categorical_accuracy")):
        assert key in stats[-1], key
    # It learned: weights moved, the validation loss fell, and the regularizer is in the total.
    for name in TRAINABLE:
        assert not np.allclose(before[name], after[name]), name
    assert stats[-1]["validation_categorical_crossentropy"] < stats[0]["validation_categorical_crossentropy"]
    assert stats[-1]["regularize_cost"] > 0
    # BatchNormalization's update ops ran (from the training branch: the inputs' mean is ~2).
    assert np.all(after["bn/moving_mean"] != before["bn/moving_mean"])
    assert np.all(after["bn/moving_variance"] != 1.0)
    # The inference tower computed with the trained variables in inference mode.
    probs = numpy_forward(after, vx)
    per_example = -np.sum(vy * np.log(probs), axis=1)
    xent = np.mean([per_example[k : k + 16].mean() for k in range(0, 64, 16)])  # as ScalarStats averages
    assert stats[-1]["validation_categorical_crossentropy"] == pytest.approx(xent, rel=1e-4)
    assert stats[-1]["validation_total_loss"] == pytest.approx(xent, rel=1e-4)

    copies = sorted(n for n in after if n.startswith("tower"))
    if kind == "replicated":
        # Tower 1 holds local copies of every model variable, equal to tower 0's after training
        # (the all-reduce alone kept them equal; no broadcast between epochs).
        assert {f"tower1/{n}" for n in TRAINABLE + MOVING} <= set(copies)
        assert not any(v.op.name.startswith("tower") for v in snap.graph.get_collection("variables"))
        for name in TRAINABLE:
            np.testing.assert_allclose(after[f"tower1/{name}"], after[name], rtol=1e-6, err_msg=name)
    else:
        # One set of variables, shared by every tower.
        assert copies == []
