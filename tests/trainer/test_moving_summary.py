"""add_moving_summary: the averages the monitors report are consistent, bias-free moving averages."""

from __future__ import annotations

import numpy as np
import pytest

from support.trainer_models import ArrayBatches
from towerpack.trainer import (
    ModelDesc,
    SimpleTrainer,
    TrainConfig,
    TrainTowerContext,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.summary import add_moving_summary
from towerpack.trainer.tower import MOVING_SUMMARY_OPS

pytestmark = pytest.mark.usefixtures("graph")
DECAY = 0.9


def debiased_ema(values, decay: float = DECAY) -> float:
    """The moving average of ``values`` with the bias towards its zero start divided out."""
    value = weight = 0.0
    for x in values:
        value, weight = decay * value + (1 - decay) * x, decay * weight + (1 - decay)
    return value / weight


class LevelModel(ModelDesc):
    """Batch k feeds x = k (k = 1, 2, ...); the model averages ``level`` (= k) and ``one`` (= 1)."""

    def inputs(self):
        return [tf.TensorSpec([None, 1], tf.float32, "x")]

    def build_graph(self, x):
        w = tfv1.get_variable("w", [], initializer=tfv1.zeros_initializer())
        level = tf.reduce_mean(x, name="level")
        add_moving_summary(level, tf.identity(level / level, name="one"), decay=DECAY)
        return tf.square(w - level, name="cost")

    def optimizer(self):
        return tfv1.train.GradientDescentOptimizer(0.01)


def test_monitors_get_the_moving_averages_each_epoch(logdir):
    steps, epochs = 2, 6
    x = np.repeat(np.arange(1, steps * epochs + 1, dtype=np.float32), 2)[:, None]  # batches of 2: 1, 2, ...
    trainer = SimpleTrainer()
    config = TrainConfig(
        model=LevelModel(), dataflow=ArrayBatches(x, batch_size=2), steps_per_epoch=steps, max_epoch=epochs
    )
    launch_train_with_config(config, trainer)
    assert [v for _, v in trainer.monitors.get_history("one")] == pytest.approx([1.0] * epochs)
    # Read with the epoch's last step, the average has seen that step's value or (as the
    # reference's summaries could) only the ones before it.
    for epoch, (_, reported) in enumerate(trainer.monitors.get_history("level"), start=1):
        seen = np.arange(1, epoch * steps + 1)
        assert reported in (pytest.approx(debiased_ema(seen)), pytest.approx(debiased_ema(seen[:-1])))


def test_a_read_in_the_step_of_an_update_is_never_a_mix():
    """Summaries are fetched in the same run as the updates; with two variables (a sum and a
    count) a read could see one updated and not the other: an average of ones far from one.
    As a loss is, the averaged tensors are slow to compute, so their updates come late in the run."""
    x = tfv1.placeholder(tf.float32, [])
    big = tf.random.uniform([300, 300])
    slow_one = x + 0.0 * tf.reduce_mean(tf.matmul(big, big))
    with TrainTowerContext(""):
        ones = [tf.identity(slow_one, name=f"one{i}") for i in range(20)]
        averages = add_moving_summary(*ones, decay=DECAY)
    update = tf.group(*tfv1.get_collection(MOVING_SUMMARY_OPS))
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        sess.run(update, {x: 1.0})
        read = np.array([sess.run([update, averages], {x: 1.0})[1] for _ in range(200)])
    assert read == pytest.approx(np.ones_like(read))


def test_returned_average_updates_then_reads_without_a_collection():
    x = tfv1.placeholder(tf.float32, [])
    with TrainTowerContext(""):
        (average,) = add_moving_summary(tf.identity(x, name="x"), decay=DECAY, collection=None)
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        got = [sess.run(average, {x: v}) for v in (4.0, 2.0, 6.0)]
    assert got == pytest.approx([4.0, debiased_ema([4.0, 2.0]), debiased_ema([4.0, 2.0, 6.0])])
