"""The trainer tells input-bound from compute-bound: real training runs with slow inputs and slow models."""

from __future__ import annotations

import json
import logging
import os
import time

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from support.trainer_models import ArrayBatches, SoftmaxClassifier, blobs
from towerpack.trainer import (
    DEFAULT_CALLBACKS,
    InputWaitTracker,
    SimpleTrainer,
    SyncMultiGPUTrainerReplicated,
    TrainConfig,
    Trainer,
    launch_train_with_config,
)
from towerpack.trainer.callbacks.input_wait import InputWait, Verdict
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.input_source import (
    DummyConstantInput,
    FeedInput,
    QueueInput,
    StagingInput,
    TFDatasetInput,
    remap_input_source,
)

STEPS, EPOCHS = 8, 2
SCALAR = "input/wait_fraction"
#: Seconds a slow DataFlow sleeps per batch: ~100x the tiny model's step on an idle machine, and
#: still several times its step when other work slows the step down 50x.
SLEEP_S = 0.06
#: The slow model multiplies two random [N, N] matrices per step (several ms on 2 cores).
N = 800
X, LABEL = blobs(256, seed=3)


class SlowBatches(ArrayBatches):
    """Batches of blobs, each after a sleep: an input pipeline slower than the model."""

    def __iter__(self):
        for dp in super().__iter__():
            time.sleep(SLEEP_S)
            yield dp


class HeavyClassifier(SoftmaxClassifier):
    """SoftmaxClassifier whose input first goes through a big matmul: a model slower than its input."""

    def build_graph(self, x, label):
        a = tf.random.uniform([N, N])
        heavy = tf.reduce_sum(tf.matmul(a, a))
        return super().build_graph(x + 1e-30 * heavy, label)


def slow():
    return SlowBatches(X, LABEL, batch_size=32)


def fast():
    return ArrayBatches(X, LABEL, batch_size=32)


def train(data, model=SoftmaxClassifier, trainer=None, **kw):
    """Train with the default callbacks and monitors; returns the trainer and its InputWaitTracker."""
    trainer = trainer or SimpleTrainer()
    extra = DEFAULT_CALLBACKS()
    (tracker,) = [cb for cb in extra if isinstance(cb, InputWaitTracker)]
    with tf.Graph().as_default():
        config = TrainConfig(
            model=model(), data=data, steps_per_epoch=STEPS, max_epoch=EPOCHS, extra_callbacks=extra, **kw
        )
        launch_train_with_config(config, trainer)
    return trainer, tracker


def epoch_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "finished, time" in r.getMessage()]


SLOW_INPUTS = {
    "feed": lambda: FeedInput(slow()),
    "queue": lambda: QueueInput(slow()),
    "staging": lambda: StagingInput(QueueInput(slow())),
    "dataset": lambda: TFDatasetInput(slow()),
    "remap": lambda: remap_input_source(QueueInput(slow()), ["x", "label"]),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(SLOW_INPUTS))
def test_slow_input_is_reported_input_bound(name, logdir, caplog):
    with caplog.at_level(logging.INFO, logger="towerpack.trainer"):
        trainer, tracker = train(SLOW_INPUTS[name]())
    with open(os.path.join(logdir, "stats.json"), encoding="utf-8") as f:
        records = json.load(f)
    fractions = [r[SCALAR] for r in records if SCALAR in r]
    assert len(fractions) == EPOCHS
    assert [v for _, v in trainer.monitors.get_history(SCALAR)] == pytest.approx(fractions)
    assert fractions[-1] > 0.5
    last = tracker.last
    assert last.verdict is Verdict.INPUT_BOUND
    # The wait is real time: STEPS batches of SLEEP_S each, not more than the epoch took.
    assert STEPS * SLEEP_S * 0.8 < last.wait_s <= last.step_s
    lines = epoch_lines(caplog)
    assert len(lines) == EPOCHS
    pct = round(fractions[-1] * 100)
    assert f"input wait {pct}% of step time: input-bound" in lines[-1]
    assert "docs/input_sources.md#input-bound-or-compute-bound" in lines[-1]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", [FeedInput, QueueInput])
def test_slow_model_with_fast_input_is_not_input_bound(kind, caplog):
    with caplog.at_level(logging.INFO, logger="towerpack.trainer"):
        trainer, tracker = train(kind(fast()), model=HeavyClassifier)
    last = tracker.last
    assert last.step_s / STEPS > 0.002  # the matmul really runs in every step
    assert trainer.monitors.get_latest(SCALAR) == pytest.approx(last.fraction)
    assert last.fraction < 0.2
    assert last.verdict is Verdict.NOT_INPUT_BOUND
    assert "of step time: not input-bound" in epoch_lines(caplog)[-1]


@pytest.mark.timeout(60)
def test_the_fraction_reaches_the_event_file(logdir):
    train(QueueInput(slow()))
    (events,) = [f for f in os.listdir(logdir) if f.startswith("events.out.tfevents")]
    acc = EventAccumulator(str(logdir / events), size_guidance={"scalars": 0})
    acc.Reload()
    values = acc.Scalars(SCALAR)
    assert [e.step for e in values] == [STEPS, 2 * STEPS]
    assert values[-1].value > 0.5


@pytest.mark.timeout(60)
def test_several_towers_report_the_mean_wait_of_a_tower():
    config = tfv1.ConfigProto(device_count={"CPU": 2}, allow_soft_placement=True)
    trainer = SyncMultiGPUTrainerReplicated(["/cpu:0", "/cpu:1"])
    trainer, tracker = train(QueueInput(slow()), trainer=trainer, session_config=config)
    (clock,) = {id(s.wait_clock()): s.wait_clock() for s in trainer.input_sources()}.values()
    assert clock.readers == 2
    last = tracker.last
    # Both towers wait for their batch: the sum over towers would be about twice the step time.
    assert 0.5 * last.step_s < last.wait_s <= last.step_s
    assert last.verdict is Verdict.INPUT_BOUND


@pytest.mark.timeout(60)
def test_constant_input_never_waits():
    trainer, _ = train(DummyConstantInput([[32, 8], [32]]))
    assert trainer.monitors.get_latest(SCALAR) < 0.2


@pytest.mark.timeout(60)
def test_a_trainer_without_an_input_source_reports_nothing(caplog):
    tracker = InputWaitTracker()
    with tf.Graph().as_default():
        trainer = Trainer()
        v = tfv1.get_variable("v", [], initializer=tfv1.zeros_initializer())
        trainer.train_op = tfv1.assign_add(v, 1.0)
        with caplog.at_level(logging.INFO, logger="towerpack.trainer"):
            trainer.train_with_defaults(steps_per_epoch=3, max_epoch=1, extra_callbacks=[tracker])
    assert trainer.input_sources() == []
    assert tracker.last is None
    with pytest.raises(KeyError):
        trainer.monitors.get_latest(SCALAR)
    (line,) = epoch_lines(caplog)
    assert line.endswith(" s")  # no note appended


def test_the_verdict_follows_the_threshold():
    assert InputWait(wait_s=0.41, step_s=1.0, threshold=0.2).describe() == (
        "input wait 41% of step time: input-bound (>= 20%), see "
        "docs/input_sources.md#input-bound-or-compute-bound"
    )
    low = InputWait(wait_s=0.05, step_s=1.0, threshold=0.2)
    assert low.verdict is Verdict.NOT_INPUT_BOUND
    assert low.describe() == "input wait 5% of step time: not input-bound"
    assert InputWait(wait_s=0.05, step_s=1.0, threshold=0.04).verdict is Verdict.INPUT_BOUND
    assert InputWait(wait_s=1.2, step_s=1.0, threshold=0.2).fraction == 1.0  # clock jitter is clipped
    with pytest.raises(ValueError, match="threshold must be a share of step time in \\(0, 1\\), got 20"):
        InputWaitTracker(threshold=20)


@pytest.mark.timeout(60)
def test_a_trainer_can_leave_the_timing_ops_out():
    trainer = SimpleTrainer()
    trainer.measure_input_wait = False
    train(QueueInput(fast()), trainer=trainer)
    assert not [op for op in trainer.sess.graph.get_operations() if op.type == "Timestamp"]
    assert trainer.input_sources()[0].wait_clock() is None
    with pytest.raises(KeyError):
        trainer.monitors.get_latest(SCALAR)


@pytest.mark.timeout(60)
def test_a_queue_driven_by_hand_needs_no_local_initializer():
    source = QueueInput(fast())
    with tf.Graph().as_default() as graph:
        source.setup(SoftmaxClassifier().get_input_signature())
        x, label = source.get_input_tensors()
        init = tfv1.global_variables_initializer()
    assert not [op for op in graph.get_operations() if op.type == "Timestamp"]
    with tfv1.Session(graph=graph) as sess:
        sess.run(init)
        source.reset_state()
        source.start_thread(sess)
        try:
            xs, labels = sess.run([x, label])
        finally:
            source.stop_thread()
    assert xs.shape == (32, 8) and labels.tolist() == LABEL[:32].tolist()
