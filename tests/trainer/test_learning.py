"""Small models really learn with the trainers, through each InputSource and both API styles."""

import numpy as np
import pytest

from support.trainer_models import ArrayBatches, LinearRegression, SoftmaxClassifier, blobs, linear_data
from towerpack.trainer import (
    Callback,
    FeedfreeTrainerBase,
    FeedInput,
    QueueInput,
    QueueInputTrainer,
    SimpleFeedfreeTrainer,
    SimpleTrainer,
    SingleCostFeedfreeTrainer,
    StagingInput,
    TFDatasetInput,
    TrainConfig,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf, tfv1

pytestmark = pytest.mark.usefixtures("graph")

ACCURACY_THRESHOLD = 0.95


class EvalAccuracy(Callback):
    """After every epoch: accuracy of the predictor on the full data set (and its weights)."""

    def __init__(self, x, label):
        self.x, self.label = x, label
        self.accuracies = []

    def _setup_graph(self):
        self.pred = self.trainer.get_predictor(["x"], ["prob"])

    def _trigger(self):
        (prob,) = self.pred(self.x)
        self.accuracies.append(float((prob.argmax(axis=1) == self.label).mean()))


def sources():
    return {
        "feed": lambda df: FeedInput(df),
        "queue": lambda df: QueueInput(df),
        "dataset": lambda df: TFDatasetInput(df),
        "staging": lambda df: StagingInput(QueueInput(df)),
    }


@pytest.mark.parametrize("kind", sorted(sources()))
def test_classifier_learns_with_each_input_source(kind):
    x, label = blobs(512, seed=1)
    df = ArrayBatches(x, label, batch_size=32, shuffle=True)
    ev = EvalAccuracy(x, label)
    config = TrainConfig(
        model=SoftmaxClassifier(), data=sources()[kind](df), callbacks=[ev], max_epoch=3, monitors=[]
    )
    trainer = SimpleTrainer()
    launch_train_with_config(config, trainer)
    assert trainer.global_step == 3 * len(df)
    assert ev.accuracies[-1] > ACCURACY_THRESHOLD, ev.accuracies
    # The loss (moving average reported by the default callbacks) falls.
    history = [v for _, v in trainer.monitors.get_history("cost")]
    assert history[-1] < 0.5 * history[0]


def expected_sgd_weights(x, y, batch, lr, epochs):
    """Plain numpy mini-batch gradient descent on mean squared error."""
    w, b = np.zeros(x.shape[1], np.float64), 0.0
    for _ in range(epochs):
        for k in range(len(x) // batch):
            xb, yb = x[k * batch : (k + 1) * batch].astype(np.float64), y[k * batch : (k + 1) * batch]
            err = xb @ w + b - yb
            w -= lr * 2.0 / batch * xb.T @ err
            b -= lr * 2.0 / batch * err.sum()
    return w, b


class ReadWeights(Callback):
    def _trigger(self):
        t = self.trainer.towers[0]
        self.w, self.b = self.trainer.sess.run([t.get_variable("w"), t.get_variable("b")])


def _linear_config(cb, **kw):
    x, y, _ = linear_data(128, seed=3)
    return (
        TrainConfig(
            model=LinearRegression(lr=0.05),
            dataflow=ArrayBatches(x, y, batch_size=16),
            callbacks=[cb],
            max_epoch=3,
            monitors=[],
            **kw,
        ),
        x,
        y,
    )


def test_both_api_styles_give_the_same_weights_as_numpy_sgd():
    new_cb = ReadWeights()
    config, x, y = _linear_config(new_cb)
    launch_train_with_config(config, SimpleTrainer())

    with tf.Graph().as_default():
        old_cb = ReadWeights()
        config, _, _ = _linear_config(old_cb)
        SimpleTrainer(config).train()

    np.testing.assert_array_equal(new_cb.w, old_cb.w)
    np.testing.assert_array_equal(new_cb.b, old_cb.b)
    w, b = expected_sgd_weights(x, y, 16, 0.05, 3)
    np.testing.assert_allclose(new_cb.w, w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(new_cb.b, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "make",
    [
        lambda c: QueueInputTrainer(c),
        lambda c: SimpleFeedfreeTrainer(c),
    ],
    ids=["QueueInputTrainer", "SimpleFeedfreeTrainer"],
)
def test_older_trainer_names_train_through_a_queue_to_the_same_weights(make):
    cb = ReadWeights()
    config, x, y = _linear_config(cb)
    dataflow = config.dataflow
    trainer = make(config)
    assert trainer.config is config
    trainer.train()
    assert config.data is None and config.dataflow is dataflow  # the user's config is left alone
    assert type(trainer.input_source) is QueueInput
    w, b = expected_sgd_weights(x, y, 16, 0.05, 3)
    np.testing.assert_allclose(cb.w, w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(cb.b, b, rtol=1e-4, atol=1e-5)
    assert trainer.global_step == 3 * 8


def test_feedfree_names_reject_feed_input():
    x, y, _ = linear_data(32)
    for cls in (SimpleFeedfreeTrainer, FeedfreeTrainerBase, SingleCostFeedfreeTrainer):
        config = TrainConfig(model=LinearRegression(), data=FeedInput(ArrayBatches(x, y, batch_size=8)))
        with pytest.raises(TypeError, match="FeedfreeInput"):
            cls(config)


class OldStyleTrainer(FeedfreeTrainerBase):
    """Written for the older API: the graph is built in _setup()."""

    def _setup(self):
        super()._setup()
        cost = self.build_train_tower()
        self.train_op = self.model.get_optimizer().minimize(cost, name="min_op")


class OldStyleSingleCostTrainer(SingleCostFeedfreeTrainer):
    def _setup(self):
        super()._setup()
        _, grads = self._get_cost_and_grad()
        self.train_op = self.model.get_optimizer().apply_gradients(grads, name="min_op")


@pytest.mark.parametrize("cls", [OldStyleTrainer, OldStyleSingleCostTrainer])
@pytest.mark.parametrize("style", ["old", "new"])
def test_subclasses_of_the_older_bases_build_their_graph_in_setup_and_train(cls, style):
    cb = ReadWeights()
    config, x, y = _linear_config(cb)
    if style == "old":
        trainer = cls(config)
        trainer.train()
    else:
        trainer = cls()
        launch_train_with_config(config, trainer)
    w, b = expected_sgd_weights(x, y, 16, 0.05, 3)
    np.testing.assert_allclose(cb.w, w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(cb.b, b, rtol=1e-4, atol=1e-5)
    assert trainer.global_step == 3 * 8
    assert type(trainer.input_source) is QueueInput


@pytest.mark.parametrize("cls", [FeedfreeTrainerBase, SingleCostFeedfreeTrainer])
def test_older_abstract_bases_used_directly_name_the_replacement(cls):
    config, _, _ = _linear_config(ReadWeights())
    with pytest.raises(NotImplementedError, match=r"abstract base.*SimpleTrainer\(\)"):
        cls(config).train()


def test_queue_input_trainer_takes_queue_input_subclasses_only():
    class MyQueueInput(QueueInput):
        pass

    x, y, _ = linear_data(64)
    source = MyQueueInput(ArrayBatches(x, y, batch_size=16))
    config = TrainConfig(model=LinearRegression(), data=source, max_epoch=1, monitors=[])
    trainer = QueueInputTrainer(config)
    trainer.train()
    assert trainer.input_source is source and trainer.global_step == 4

    config = TrainConfig(model=LinearRegression(), data=TFDatasetInput(ArrayBatches(x, y, batch_size=16)))
    with pytest.raises(TypeError, match="QueueInputTrainer needs a QueueInput, got TFDatasetInput"):
        QueueInputTrainer(config)


def test_queue_input_trainer_new_style_uses_a_queue():
    x, y, _ = linear_data(64)
    trainer = QueueInputTrainer()
    config = TrainConfig(
        model=LinearRegression(), dataflow=ArrayBatches(x, y, batch_size=16), max_epoch=1, monitors=[]
    )
    launch_train_with_config(config, trainer)
    assert type(trainer.input_source).__name__ == "QueueInput"


def test_simple_trainer_feeds_a_dataflow():
    x, y, _ = linear_data(64)
    trainer = SimpleTrainer()
    config = TrainConfig(
        model=LinearRegression(), dataflow=ArrayBatches(x, y, batch_size=16), max_epoch=1, monitors=[]
    )
    launch_train_with_config(config, trainer)
    assert type(trainer.input_source).__name__ == "FeedInput"
    assert trainer.train_op.name == "train_op"


def test_update_ops_run_with_every_step():
    class CountingModel(LinearRegression):
        def build_graph(self, x, y):
            n = tfv1.get_variable("seen", initializer=0.0, trainable=False)
            tfv1.add_to_collection(tfv1.GraphKeys.UPDATE_OPS, tfv1.assign_add(n, 1.0))
            return super().build_graph(x, y)

    seen = []

    class ReadSeen(Callback):
        def _trigger(self):
            seen.append(float(self.trainer.sess.run(self.trainer.towers[0].get_variable("seen"))))

    x, y, _ = linear_data(64)
    config = TrainConfig(
        model=CountingModel(),
        dataflow=ArrayBatches(x, y, batch_size=16),
        max_epoch=2,
        callbacks=[ReadSeen()],
        monitors=[],
    )
    launch_train_with_config(config, SimpleTrainer())
    assert seen == [4.0, 8.0]


def test_custom_trainer_with_graph_built_in_init_trains_with_defaults():
    """understand-trainer.txt: create the graph in __init__, set train_op, train with defaults."""
    from towerpack.trainer import Trainer

    class MyTrainer(Trainer):
        def __init__(self):
            super().__init__()
            self.w = tfv1.get_variable("w", initializer=5.0)
            loss = tf.square(self.w - 2.0)
            self.train_op = tfv1.train.GradientDescentOptimizer(0.25).minimize(loss)

    trainer = MyTrainer()
    final = []

    class Read(Callback):
        def _after_train(self):
            final.append(float(self.trainer.sess.run(self.trainer.w)))

    trainer.train_with_defaults(callbacks=[Read()], monitors=[], steps_per_epoch=5, max_epoch=2)
    # Each step halves the distance to 2.0.
    assert final[0] == pytest.approx(2.0 + 3.0 * 0.5**10, rel=1e-6)
