"""The extra callbacks under the real trainer: schedules (also after resume), triggers, validation, timing."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from support.callback_runs import RecordLR, train_classifier
from support.trainer_models import ArrayBatches, SoftmaxClassifier, blobs
from towerpack.trainer.callbacks.base import Callback
from towerpack.trainer.callbacks.inference import ClassificationError, ScalarStats
from towerpack.trainer.callbacks.inference_runner import InferenceRunner
from towerpack.trainer.callbacks.misc import EstimatedTimeLeft
from towerpack.trainer.callbacks.param import (
    HyperParamSetterWithFunc,
    ObjAttrParam,
    ScheduledHyperParamSetter,
)
from towerpack.trainer.callbacks.prof import ThroughputTracker
from towerpack.trainer.callbacks.saver import ModelSaver
from towerpack.trainer.callbacks.trigger import EnableCallbackIf, PeriodicCallback, PeriodicTrigger
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.config import AutoResumeTrainConfig, TrainConfig
from towerpack.trainer.input_source import QueueInput, TFDatasetInput
from towerpack.trainer.interface import launch_train_with_config
from towerpack.trainer.trainers import SimpleTrainer

pytestmark = pytest.mark.usefixtures("graph")

X, LABEL = blobs(256, seed=2)


def batches(batch_size=32):
    return ArrayBatches(X, LABEL, batch_size=batch_size)


def train(callbacks, steps=4, epochs=3, **config):
    return train_classifier(callbacks, X, LABEL, steps, epochs, **config)


def test_scheduled_setter_applies_values_after_the_scheduled_epochs():
    rec = RecordLR()
    train([ScheduledHyperParamSetter("learning_rate", [(1, 0.05), (3, 0.01)]), rec], epochs=4)
    # The model starts at 0.1; a value scheduled at epoch e applies from epoch e + 1.
    assert rec.values == {1: 0.1, 2: 0.05, 3: 0.05, 4: 0.01}


def test_scheduled_setter_reconciles_when_starting_later():
    rec = RecordLR()
    train(
        [ScheduledHyperParamSetter("learning_rate", [(1, 0.05), (3, 0.01)]), rec], starting_epoch=3, epochs=4
    )
    assert rec.values == {3: 0.05, 4: 0.01}


def test_scheduled_setter_linear_interpolation():
    rec = RecordLR()
    train([ScheduledHyperParamSetter("learning_rate", [(0, 0.1), (4, 0.5)], interp="linear"), rec], epochs=4)
    assert rec.values == {1: 0.1, 2: 0.2, 3: 0.3, 4: 0.4}


def test_scheduled_setter_step_based():
    seen = []
    holder = type("Holder", (), {"value": None})()

    class Watch(Callback):
        def _trigger_step(self):
            seen.append((self.global_step, holder.value))

    setter = ScheduledHyperParamSetter(ObjAttrParam(holder, "value"), [(0, "a"), (3, "b")], step_based=True)
    train([setter, Watch()], steps=3, epochs=2)
    assert seen == [(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "b"), (6, "b")]


@pytest.mark.parametrize("step_based", [False, True], ids=["epoch-based", "step-based"])
def test_scheduled_setter_is_correct_after_auto_resume(logdir, step_based):
    """A Python attribute is not in the checkpoint: after resuming, the schedule alone restores it."""
    schedule = [(0, 1.0), (6, 2.0), (12, 3.0)] if step_based else [(0, 1.0), (2, 2.0), (3, 3.0)]
    during = {}

    def run(epochs, config_cls):
        holder = type("Holder", (), {"value": 0.0})()

        class Watch(Callback):
            def _before_epoch(self):
                during[self.epoch_num] = holder.value

        setter = ScheduledHyperParamSetter(ObjAttrParam(holder, "value"), schedule, step_based=step_based)
        with tf.Graph().as_default():
            return train([setter, Watch(), ModelSaver()], steps=3, epochs=epochs, config_cls=config_cls)

    run(2, TrainConfig)
    resumed = run(4, AutoResumeTrainConfig)
    assert resumed.starting_epoch == 3
    # Epoch 3 begins after 2 epochs (= 6 steps): both schedules say 2.0 then; epoch 4: 3.0 (after
    # epoch 3 / step 9 for the epoch-based one, and still 2.0 for the step-based one until step 12).
    assert during == {1: 1.0, 2: 1.0, 3: 2.0, 4: 2.0 if step_based else 3.0}


def test_hyperparam_setter_with_func():
    rec = RecordLR()
    train(
        [HyperParamSetterWithFunc("learning_rate", lambda epoch, old: old * 0.5 if epoch >= 1 else old), rec]
    )
    assert rec.values == {1: 0.1, 2: 0.05, 3: 0.025}


def test_graph_var_param_names_missing_variable():
    with pytest.raises(ValueError, match="no variable named 'nope:0'"):
        train([ScheduledHyperParamSetter("nope", [(0, 1.0)])])


class Counter(Callback):
    """Records the global steps / epochs at which each of its methods ran."""

    def __init__(self):
        self.calls = {"trigger": [], "before_run": [], "trigger_step": [], "before_epoch": []}

    def _trigger(self):
        self.calls["trigger"].append((self.epoch_num, self.global_step))

    def _before_run(self, ctx):
        self.calls["before_run"].append(self.global_step)

    def _trigger_step(self):
        self.calls["trigger_step"].append(self.global_step)

    def _before_epoch(self):
        self.calls["before_epoch"].append(self.epoch_num)


def test_periodic_trigger_every_k_steps_and_epochs():
    by_step, by_epoch = Counter(), Counter()
    train(
        [
            PeriodicTrigger(by_step, every_k_steps=3),
            PeriodicTrigger(by_epoch, every_k_epochs=2, before_train=True),
        ],
        steps=4,
        epochs=4,
    )
    assert by_step.calls["trigger"] == [(1, 3), (2, 6), (3, 9), (3, 12), (4, 15)]
    assert by_epoch.calls["trigger"] == [(0, 0), (2, 8), (4, 16)]
    # Everything else still reaches the wrapped callbacks.
    assert len(by_step.calls["before_run"]) == 16 and len(by_step.calls["trigger_step"]) == 16


def test_enable_callback_if_gates_runs_steps_and_epochs():
    c = Counter()
    train([EnableCallbackIf(c, lambda self: self.epoch_num == 2)], steps=3, epochs=3)
    assert c.calls["before_run"] == [3, 4, 5]
    assert c.calls["trigger_step"] == [4, 5, 6]
    assert c.calls["before_epoch"] == [2]
    assert c.calls["trigger"] == [(2, 6)]


def test_periodic_callback_also_runs_on_the_last_step():
    c = Counter()
    train([PeriodicCallback(c, every_k_steps=4)], steps=5, epochs=2)
    # Enabled when global_step % 4 == 0 at the time of the call, and at the last step of training.
    assert c.calls["before_run"] == [0, 4, 8, 9]
    assert c.calls["trigger_step"] == [4, 8, 10]


def test_estimated_time_left_logs_and_reaches_zero(caplog):
    eta = EstimatedTimeLeft(last_k_epochs=2)
    with caplog.at_level(logging.INFO, logger="towerpack.trainer"):
        train([eta], epochs=3)
    messages = [r.getMessage() for r in caplog.records if "Estimated time left" in r.getMessage()]
    assert len(messages) == 2  # after epochs 1 and 2; none after the last
    assert eta.estimate == 0.0


def test_throughput_tracker_reports_every_epoch():
    tracker = ThroughputTracker(samples_per_step=32)
    trainer = train([tracker], epochs=3)
    steps = trainer.monitors.get_history("Throughput (steps/sec)")
    samples = trainer.monitors.get_history("Throughput (samples/sec)")
    assert [s for s, _ in steps] == [4, 8, 12]
    assert all(v > 0 for _, v in steps)
    assert [v for _, v in samples] == pytest.approx([32 * v for _, v in steps])


class NoisyClassifier(SoftmaxClassifier):
    """Also exposes ``incorrect_vector`` (1 per misclassified example) for ClassificationError."""

    def build_graph(self, x, label):
        w = tfv1.get_variable("W", [self.dim, self.classes], initializer=tfv1.zeros_initializer())
        b = tfv1.get_variable("b", [self.classes], initializer=tfv1.zeros_initializer())
        logits = tf.matmul(x, w) + b
        tf.nn.softmax(logits, name="prob")
        wrong = tf.not_equal(tf.argmax(logits, axis=1, output_type=tf.int32), label)
        tf.cast(wrong, tf.float32, name="incorrect_vector")
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=logits)
        return tf.reduce_mean(losses, name="cost")


def flipped_labels(label, fraction, seed=0):
    rng = np.random.RandomState(seed)
    out = label.copy()
    idx = rng.choice(len(label), int(len(label) * fraction), replace=False)
    out[idx] = (out[idx] + 1) % 3
    return out


@pytest.mark.parametrize("kind", ["dataflow", "queue", "dataset"])
def test_inference_runner_matches_a_direct_evaluation(kind):
    x_val, label_val = blobs(200, seed=2)  # the same classes as the training data
    label_val = flipped_labels(label_val, 0.25)
    val_df = ArrayBatches(x_val, label_val, batch_size=40)
    val_input = {"dataflow": val_df, "queue": QueueInput(val_df), "dataset": TFDatasetInput(val_df)}[kind]
    direct = {}

    class Direct(Callback):
        def _setup_graph(self):
            self.pred = self.trainer.get_predictor(["x"], ["prob"])

        def _trigger(self):
            (prob,) = self.pred(x_val)
            direct[self.epoch_num] = float((prob.argmax(axis=1) != label_val).mean())

    runner = InferenceRunner(val_input, [ScalarStats("cost"), ClassificationError("incorrect_vector")])
    config = TrainConfig(
        model=NoisyClassifier(),
        dataflow=batches(),
        callbacks=[runner, Direct()],
        steps_per_epoch=4,
        max_epoch=2,
    )
    trainer = SimpleTrainer()
    launch_train_with_config(config, trainer)
    errors = trainer.monitors.get_history("validation_error")
    assert [s for s, _ in errors] == [4, 8]
    assert [v for _, v in errors] == pytest.approx([direct[1], direct[2]])
    assert 0.15 < errors[-1][1] < 0.35  # about the 25% of flipped labels
    assert trainer.global_step == 8
    assert len(trainer.monitors.get_history("validation_cost")) == 2


def test_inference_runner_bad_tensor_name_is_reported():
    runner = InferenceRunner(batches(), ScalarStats("no_such_tensor"))
    with pytest.raises(ValueError, match="cannot fetch 'no_such_tensor' in the inference tower"):
        train([runner])
