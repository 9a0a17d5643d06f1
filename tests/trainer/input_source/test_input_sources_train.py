"""A small model really learns with every InputSource under the real trainer (both API styles)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from support.procs import free_port, terminate_tree
from support.trainer_models import ArrayBatches, SoftmaxClassifier, blobs
from towerpack.trainer.callbacks.base import Callback, CallbackFactory
from towerpack.trainer.callbacks.inference import ScalarStats
from towerpack.trainer.callbacks.inference_runner import InferenceRunner
from towerpack.trainer.compat import tf
from towerpack.trainer.config import TrainConfig
from towerpack.trainer.input_source import (
    DummyConstantInput,
    FeedInput,
    QueueInput,
    StagingInput,
    TFDatasetInput,
    ZMQInput,
)
from towerpack.trainer.interface import launch_train_with_config
from towerpack.trainer.trainers import SimpleTrainer

X, LABEL = blobs(384, seed=1)
X_TRAIN, LABEL_TRAIN = X[:256], LABEL[:256]
X_VAL, LABEL_VAL = X[256:], LABEL[256:]
STEPS, EPOCHS = 8, 3
#: Well-separated blobs: a softmax classifier reaches this within 24 steps of batch 32.
ACCURACY_THRESHOLD = 0.9


def train_batches():
    return ArrayBatches(X_TRAIN, LABEL_TRAIN, batch_size=32, shuffle=True)


def val_batches():
    return ArrayBatches(X_VAL, LABEL_VAL, batch_size=64)


def tf_dataset():
    return tf.data.Dataset.from_tensor_slices((X_TRAIN, LABEL_TRAIN)).shuffle(256, seed=0).batch(32).repeat()


SOURCES = {
    "feed": lambda: FeedInput(train_batches()),
    "queue": lambda: QueueInput(train_batches()),
    "staging": lambda: StagingInput(QueueInput(train_batches())),
    "dataset-from-dataflow": lambda: TFDatasetInput(train_batches()),
    "dataset": lambda: TFDatasetInput(tf_dataset()),
}


def train(data, callbacks=(), steps=STEPS, epochs=EPOCHS, legacy=False):
    """Train SoftmaxClassifier in a fresh graph; returns the trainer."""
    with tf.Graph().as_default():
        config = TrainConfig(
            model=SoftmaxClassifier(),
            data=data() if callable(data) else data,
            callbacks=[InferenceRunner(val_batches(), ScalarStats(["cost", "accuracy"])), *callbacks],
            steps_per_epoch=steps,
            max_epoch=epochs,
        )
        if legacy:
            trainer = SimpleTrainer(config)
            trainer.train()
        else:
            trainer = SimpleTrainer()
            launch_train_with_config(config, trainer)
    return trainer


def assert_learned(trainer):
    costs = [v for _, v in trainer.monitors.get_history("validation_cost")]
    assert len(costs) == EPOCHS
    assert costs[-1] < costs[0] < np.log(3)  # below chance-level cross-entropy, and still falling
    assert trainer.monitors.get_latest("validation_accuracy") >= ACCURACY_THRESHOLD
    assert trainer.global_step == STEPS * EPOCHS  # validation runs did not count as steps


@pytest.mark.parametrize("name", list(SOURCES))
def test_model_learns_with_each_input_source(name):
    assert_learned(train(SOURCES[name]))


def test_both_api_styles_train_the_same_with_queue_input():
    new = train(lambda: QueueInput(ArrayBatches(X_TRAIN, LABEL_TRAIN, batch_size=32)))
    old = train(lambda: QueueInput(ArrayBatches(X_TRAIN, LABEL_TRAIN, batch_size=32)), legacy=True)
    hist_new, hist_old = (t.monitors.get_history("validation_cost") for t in (new, old))
    assert [s for s, _ in hist_new] == [s for s, _ in hist_old] == [8, 16, 24]
    np.testing.assert_allclose([v for _, v in hist_new], [v for _, v in hist_old], rtol=1e-5)


PRODUCER = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[2])
from support.trainer_models import ArrayBatches, blobs
from towerpack.dataflow import send_dataflow_zmq

x, label = blobs(384, seed=1)
df = ArrayBatches(x[:256], label[:256], batch_size=32, shuffle=True)
send_dataflow_zmq(df, sys.argv[1], hwm=16, bind=True)
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
def test_model_learns_from_a_zmq_producer_process(request):
    addr = f"tcp://127.0.0.1:{free_port()}"
    tests_dir = str(request.config.rootpath / "tests")
    proc = subprocess.Popen(
        [sys.executable, "-c", PRODUCER, addr, tests_dir], stderr=subprocess.PIPE, text=True
    )
    try:
        trainer = train(lambda: ZMQInput(addr, hwm=16))
    finally:
        terminate_tree(proc.pid)
        proc.wait(10)
        err = proc.stderr.read()
        proc.stderr.close()
    assert_learned(trainer)
    assert "Traceback" not in err


def test_dummy_constant_input_runs_the_model_without_data():
    with tf.Graph().as_default():
        trainer = SimpleTrainer()
        config = TrainConfig(
            model=SoftmaxClassifier(),
            data=DummyConstantInput([[16, 8], [16]]),
            steps_per_epoch=5,
            max_epoch=2,
        )
        launch_train_with_config(config, trainer)
    assert trainer.global_step == 10


def test_finite_feed_input_ends_training_cleanly():
    ends = []
    with tf.Graph().as_default():
        trainer = SimpleTrainer()
        config = TrainConfig(
            model=SoftmaxClassifier(),
            data=FeedInput(train_batches(), infinite=False),
            callbacks=[CallbackFactory(after_train=lambda cb: ends.append(cb.trainer.global_step))],
            steps_per_epoch=5,
            max_epoch=3,
        )
        launch_train_with_config(config, trainer)
    assert ends == [8]  # the 8 batches of one pass, then the input was exhausted


def test_failing_dataflow_stops_training_with_its_error():
    class Failing(ArrayBatches):
        def __iter__(self):
            yield from list(super().__iter__())[:3]
            raise OSError("disk went away")

    source = QueueInput(Failing(X_TRAIN, LABEL_TRAIN, batch_size=32))
    # Input callbacks start the enqueue thread first; wait until it has failed, then train.
    wait = CallbackFactory(before_train=lambda cb: source.thread.join(10))
    with (
        tf.Graph().as_default(),
        pytest.raises(RuntimeError, match=r"input thread failed: OSError\('disk went away'"),
    ):
        trainer = SimpleTrainer()
        config = TrainConfig(model=SoftmaxClassifier(), data=source, callbacks=[wait], steps_per_epoch=8)
        launch_train_with_config(config, trainer)
    assert trainer.global_step == 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "wrap",
    [QueueInput, lambda df: StagingInput(QueueInput(df))],
    ids=["queue", "staging"],
)
def test_dataflow_failing_while_a_step_waits_raises_its_error(wrap):
    """The failure closes the queue under a blocked dequeue; that must not pass for exhausted input."""
    two_steps_done = threading.Event()

    class FailsLater(ArrayBatches):
        def __iter__(self):
            yield from list(super().__iter__())[:3]
            two_steps_done.wait(10)
            time.sleep(0.5)  # by now the next step waits on the empty queue
            raise OSError("disk went away")

    class Signal(Callback):
        def _trigger_step(self):
            if self.local_step == 1:
                two_steps_done.set()

    ends = []
    source = wrap(FailsLater(X_TRAIN, LABEL_TRAIN, batch_size=32))
    callbacks = [Signal(), CallbackFactory(after_train=lambda cb: ends.append(cb.trainer.global_step))]
    with (
        tf.Graph().as_default(),
        pytest.raises(RuntimeError, match=r"input thread failed: OSError\('disk went away'") as info,
    ):
        config = TrainConfig(
            model=SoftmaxClassifier(), data=source, callbacks=callbacks, steps_per_epoch=8, max_epoch=2
        )
        launch_train_with_config(config, SimpleTrainer())
    assert isinstance(info.value.__cause__, OSError)
    # It surfaced from the blocked step (not from the check before the next one).
    assert isinstance(info.value.__context__, tf.errors.OutOfRangeError)
    assert any("training failed at epoch 1, local_step" in note for note in info.value.__notes__)
    assert len(ends) == 1 and ends[0] < 8  # after_train ran, mid-epoch
