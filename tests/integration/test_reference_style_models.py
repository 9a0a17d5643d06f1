"""Models written the way a tensorpack user writes them train, save and reload under towerpack.

Each model below is ours, written in the style of the reference's example scripts: a ``ModelDesc``
built from ``argscope``, ``LinearWrap`` and the layers, in both APIs (``inputs``/``build_graph``/
``optimizer`` and the older ``_get_inputs``/``InputDesc``/``_build_graph`` setting ``self.cost``/
``_get_optimizer`` with the layers' old argument names), one reading ``self.training`` and a
pre-activation ResNet in channels_first. They train on in-memory images whose label is a bright
band under the trainers, callbacks and predictors those scripts use; the tests check what such a
script relies on: statistics in ``stats.json``, accuracy above chance, checkpoint variable names
as the reference's layers name them, image summaries in training towers only, and predictions
from the saved checkpoint equal to the trained model's.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from towerpack.dataflow import BatchData, DataFromList, PrintData
from towerpack.trainer import (
    AvgPooling,
    BatchNorm,
    BNReLU,
    Callback,
    ClassificationError,
    Conv2D,
    FeedInput,
    FullyConnected,
    GlobalAvgPooling,
    InferenceRunner,
    InputDesc,
    LinearWrap,
    MaxPooling,
    MaxSaver,
    ModelDesc,
    ModelSaver,
    OfflinePredictor,
    PredictConfig,
    QueueInput,
    ScalarStats,
    ScheduledHyperParamSetter,
    SimpleTrainer,
    SmartInit,
    StatMonitorParamSetter,
    StopTraining,
    SyncMultiGPUTrainerParameterServer,
    SyncMultiGPUTrainerReplicated,
    TrainConfig,
    argscope,
    get_global_step_var,
    l2_regularizer,
    launch_train_with_config,
    logger,
    regularize_cost,
)
from towerpack.trainer.summary import add_moving_summary, add_param_summary

pytestmark = pytest.mark.slow

CLASSES = 10


def banded_images(n: int, shape: tuple[int, ...], seed: int = 0) -> list[list]:
    """``[image, label]`` datapoints in [0, 1]: faint noise with the label's band of rows lit."""
    rng = np.random.RandomState(seed)
    band = shape[0] // CLASSES
    points = []
    for label in rng.randint(CLASSES, size=n):
        img = rng.uniform(0.0, 0.3, size=shape).astype(np.float32)
        img[label * band : (label + 1) * band] += 0.7
        points.append([img, np.int32(label)])
    return points


def batches(points: list[list], batch_size: int, train: bool) -> BatchData:
    return BatchData(DataFromList(points, shuffle=train), batch_size, remainder=not train)


def stats_of(logdir) -> list[dict]:
    return json.loads((logdir / "stats.json").read_text())


def accuracy(probabilities: np.ndarray, points: list[list]) -> float:
    return float(np.mean(probabilities.argmax(axis=1) == [label for _, label in points]))


# ---- a small convnet, the newer API (as examples/basics' MNIST script) ------------------------


class BandNet(ModelDesc):
    """Two conv/pool stages and two fully connected layers on 28x28 grey images."""

    def inputs(self):
        return [
            tf.placeholder(tf.float32, (None, 28, 28), "input"),
            tf.placeholder(tf.int32, (None,), "label"),
        ]

    def build_graph(self, image, label):
        image = tf.expand_dims(image * 2 - 1, 3)  # NHWC with one channel, centred at zero
        with argscope(Conv2D, kernel_size=3, activation=tf.nn.relu, filters=16):
            logits = (
                LinearWrap(image)
                .Conv2D("conv1")
                .MaxPooling("pool1", 2)
                .Conv2D("conv2", filters=24)
                .MaxPooling("pool2", 2)
                .FullyConnected("fc1", 64, activation=tf.nn.relu)
                .Dropout("drop", rate=0.25)
                .FullyConnected("fc2", CLASSES, activation=tf.identity)()
            )
        xent = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label), name="xent"
        )
        hit = tf.cast(tf.nn.in_top_k(logits, label, 1), tf.float32, name="hit")
        add_moving_summary(tf.reduce_mean(hit, name="accuracy"), tf.reduce_mean(1 - hit, name="train_error"))
        decay = tf.multiply(1e-5, regularize_cost("fc.*/W", tf.nn.l2_loss), name="weight_decay")
        total = tf.add_n([xent, decay], name="total_cost")
        add_moving_summary(xent, decay, total)
        add_param_summary((".*/W", ["histogram", "rms"]))
        return total

    def optimizer(self):
        lr = tf.train.exponential_decay(
            2e-3, get_global_step_var(), decay_steps=100, decay_rate=0.5, staircase=True, name="learning_rate"
        )
        tf.summary.scalar("lr", lr)
        return tf.train.AdamOptimizer(lr)


@pytest.mark.timeout(120)
def test_convnet_trains_and_keeps_its_best_checkpoint(tmp_path):
    logdir = tmp_path / "bandnet"
    logger.set_logger_dir(str(logdir), action="d")
    train = PrintData(batches(banded_images(128, (28, 28)), 32, train=True))
    config = TrainConfig(
        model=BandNet(),
        data=FeedInput(train),
        callbacks=[
            ModelSaver(),
            InferenceRunner(
                batches(banded_images(64, (28, 28), seed=1), 32, train=False),
                ScalarStats(["xent", "accuracy"], prefix="val"),
            ),
            MaxSaver("val_accuracy"),
        ],
        steps_per_epoch=len(train),
        max_epoch=3,
    )
    with tf.Graph().as_default():
        launch_train_with_config(config, SimpleTrainer())
    stats = stats_of(logdir)
    assert {"val_accuracy", "val_xent", "train_error", "total_cost", "lr"} <= set(stats[-1])
    assert stats[-1]["val_xent"] < stats[0]["val_xent"]
    assert stats[-1]["val_accuracy"] > 0.3, "no better than chance (0.1)"
    assert list(logdir.glob("max-val_accuracy*"))


# ---- the same kind of model in the older API (2017 scripts) -----------------------------------


class LegacyBandNet(ModelDesc):
    """``_get_inputs``/``_build_graph``/``_get_optimizer``, with the layers' old argument names."""

    def _get_inputs(self):
        return [InputDesc(tf.float32, (None, 28, 28), "input"), InputDesc(tf.int32, (None,), "label")]

    def _build_graph(self, inputs):
        image, label = inputs
        image = tf.expand_dims(image * 2 - 1, 3)
        with argscope(Conv2D, kernel_shape=3, nl=tf.nn.relu, out_channel=16):
            logits = (
                LinearWrap(image)
                .Conv2D("conv1")
                .MaxPooling("pool1", 2)
                .Conv2D("conv2")
                .MaxPooling("pool2", 2)
                .FullyConnected("fc1", out_dim=64, nl=tf.nn.relu)
                .Dropout("drop", 0.75)  # keep_prob, as the old signature had it
                .FullyConnected("fc2", out_dim=CLASSES, nl=tf.identity)()
            )
        tf.nn.softmax(logits, name="prob")
        xent = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label), name="xent"
        )
        hit = tf.cast(tf.nn.in_top_k(logits, label, 1), tf.float32, name="hit")
        add_moving_summary(tf.reduce_mean(hit, name="accuracy"), tf.reduce_mean(1 - hit, name="train_error"))
        decay = tf.multiply(1e-5, regularize_cost("fc.*/W", tf.nn.l2_loss), name="weight_decay")
        self.cost = tf.add_n([xent, decay], name="total_cost")
        add_moving_summary(xent, self.cost)

    def _get_optimizer(self):
        lr = tf.Variable(2e-3, trainable=False, name="learning_rate")
        tf.summary.scalar("lr", lr)
        return tf.train.AdamOptimizer(lr)


@pytest.mark.timeout(120)
def test_older_api_model_trains_and_predicts_from_its_log_directory(tmp_path):
    logdir = tmp_path / "legacy"
    logger.set_logger_dir(str(logdir), action="d")
    model = LegacyBandNet()
    assert model.input_names == ["input", "label"]
    train = batches(banded_images(128, (28, 28)), 32, train=True)
    config = TrainConfig(
        model=model,
        dataflow=train,
        callbacks=[
            ModelSaver(),
            InferenceRunner(
                batches(banded_images(64, (28, 28), seed=1), 32, train=False),
                ScalarStats(["xent", "accuracy"]),
            ),
            MaxSaver("validation_accuracy"),
        ],
        steps_per_epoch=len(train),
        max_epoch=3,
    )
    with tf.Graph().as_default():
        SimpleTrainer(config).train()  # the older way to start training
    stats = stats_of(logdir)
    assert {"validation_accuracy", "train_error", "total_cost", "lr"} <= set(stats[-1])
    assert stats[-1]["validation_xent"] < stats[0]["validation_xent"]
    predict = OfflinePredictor(
        PredictConfig(
            model=LegacyBandNet(),
            input_names=["input"],
            output_names=["prob"],
            session_init=SmartInit(str(logdir)),
        )
    )
    held_out = banded_images(32, (28, 28), seed=2)
    (prob,) = predict(np.stack([img for img, _ in held_out]))
    assert prob.shape == (32, CLASSES)
    np.testing.assert_allclose(prob.sum(axis=1), 1.0, rtol=1e-5)
    assert accuracy(prob, held_out) > 0.3, "the loaded model is no better than chance (0.1)"


# ---- a convnet that reads self.training (as examples/basics' CIFAR script) ---------------------


class ColourNet(ModelDesc):
    """BNReLU convolutions and dropout only while training; shows training images in TensorBoard."""

    def inputs(self):
        return [
            tf.TensorSpec((None, 30, 30, 3), tf.float32, "input"),
            tf.TensorSpec((None,), tf.int32, "label"),
        ]

    def build_graph(self, image, label):
        if self.training:
            tf.summary.image("train_image", image, max_outputs=4)
        drop_rate = tf.constant(0.4 if self.training else 0.0)
        with (
            argscope(Conv2D, activation=BNReLU, use_bias=False, kernel_size=3),
            argscope([Conv2D, MaxPooling, BatchNorm], data_format="channels_last"),
        ):
            logits = (
                LinearWrap(image * 2 - 1)
                .Conv2D("conv1a", filters=16)
                .Conv2D("conv1b", filters=16)
                .MaxPooling("pool1", 3, stride=2, padding="SAME")
                .Conv2D("conv2a", filters=32)
                .MaxPooling("pool2", 3, stride=2, padding="SAME")
                .Conv2D("conv3a", filters=32, padding="VALID")
                .FullyConnected("fc1", 96, activation=tf.nn.relu)
                .Dropout(rate=drop_rate)
                .FullyConnected("logits", out_dim=CLASSES)()
            )
        xent = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label), name="cost"
        )
        hit = tf.cast(tf.nn.in_top_k(predictions=logits, targets=label, k=1), tf.float32)
        add_moving_summary(tf.reduce_mean(hit, name="accuracy"))
        decay = regularize_cost("fc.*/W", l2_regularizer(1e-4), name="regularize_loss")
        add_moving_summary(xent, decay)
        add_param_summary((".*/W", ["histogram"]))
        return tf.add_n([xent, decay], name="total_cost")

    def optimizer(self):
        lr = tf.get_variable("learning_rate", initializer=1e-2, trainable=False)
        tf.summary.scalar("lr", lr)
        return tf.train.AdamOptimizer(lr, epsilon=1e-3)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("towers", [1, 2])
def test_training_only_graph_parts_stay_out_of_inference(tmp_path, towers):
    logdir = tmp_path / "colournet"
    logger.set_logger_dir(str(logdir), action="d")

    def lower_on_plateau(lr):
        if lr < 1e-4:
            raise StopTraining()
        return lr * 0.3

    config = TrainConfig(
        model=ColourNet(),
        data=QueueInput(batches(banded_images(64, (30, 30, 3)), 16, train=True)),
        callbacks=[
            ModelSaver(),
            InferenceRunner(
                batches(banded_images(32, (30, 30, 3), seed=1), 16, train=False),
                ScalarStats(["accuracy", "cost"]),
            ),
            StatMonitorParamSetter(
                "learning_rate",
                "validation_accuracy",
                lower_on_plateau,
                threshold=0.001,
                last_k=10,
                reverse=True,
            ),
        ],
        max_epoch=2,
    )
    with tf.Graph().as_default() as graph:
        trainer = SimpleTrainer() if towers == 1 else SyncMultiGPUTrainerParameterServer(towers)
        launch_train_with_config(config, trainer)
    # `if self.training:` made one image summary per training tower and none in the inference tower.
    summaries = sorted(op.name for op in graph.get_operations() if op.type == "ImageSummary")
    assert len(summaries) == towers, summaries
    assert all(name.endswith("train_image") and "Infer" not in name for name in summaries)
    stats = stats_of(logdir)
    assert {"validation_accuracy", "validation_cost", "accuracy", "regularize_loss", "lr"} <= set(stats[-1])
    assert np.isfinite(stats[-1]["validation_cost"])


# ---- a pre-activation ResNet in channels_first (as examples/ResNet's CIFAR script) --------------


class PreactResNet(ModelDesc):
    """Three stages of ``blocks`` pre-activation residual blocks (8, 16, 32 channels) on 32x32 RGB."""

    def __init__(self, blocks: int, data_format: str):
        super().__init__()
        self.blocks = blocks
        self.data_format = data_format

    def inputs(self):
        return [
            tf.placeholder(tf.float32, [None, 32, 32, 3], "input"),
            tf.placeholder(tf.int32, [None], "label"),
        ]

    def residual(self, name, x, channels, stride):
        """BNReLU, two 3x3 convolutions; a shortcut that halves the size and zero-pads new channels."""
        axis = 1 if self.data_format == "channels_first" else 3
        with tf.variable_scope(name):
            y = Conv2D("conv1", BNReLU(x), channels, strides=stride, activation=BNReLU)
            y = Conv2D("conv2", y, channels)
            extra = channels - x.shape[axis]
            if extra:
                x = AvgPooling("pool", x, 2)
                pad = [[0, 0]] * 4
                pad[axis] = [extra // 2, extra - extra // 2]
                x = tf.pad(x, pad)
            return x + y

    def build_graph(self, image, label):
        image = image * 2 - 1
        if self.data_format == "channels_first":
            image = tf.transpose(image, [0, 3, 1, 2])
        with (
            argscope([Conv2D, AvgPooling, BatchNorm, GlobalAvgPooling], data_format=self.data_format),
            argscope(
                Conv2D,
                use_bias=False,
                kernel_size=3,
                kernel_initializer=tf.variance_scaling_initializer(scale=2.0, mode="fan_out"),
            ),
        ):
            x = Conv2D("conv0", image, 8, activation=BNReLU)
            for stage, channels in enumerate([8, 16, 32], start=1):
                for block in range(self.blocks):
                    stride = 2 if stage > 1 and block == 0 else 1
                    x = self.residual(f"stage{stage}.{block}", x, channels, stride)
            x = GlobalAvgPooling("gap", BNReLU("bn_final", x))
        logits = FullyConnected("linear", x, CLASSES)
        tf.nn.softmax(logits, name="output")
        xent = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label), name="xent"
        )
        wrong = tf.cast(tf.logical_not(tf.nn.in_top_k(logits, label, 1)), tf.float32, name="wrong_vector")
        add_moving_summary(tf.reduce_mean(wrong, name="train_error"))
        decay = tf.multiply(1e-4, regularize_cost(".*/W", tf.nn.l2_loss), name="wd_cost")
        add_moving_summary(xent, decay)
        return tf.add_n([xent, decay], name="cost")

    def optimizer(self):
        lr = tf.get_variable("learning_rate", initializer=0.05, trainable=False)
        return tf.train.MomentumOptimizer(lr, 0.9)


class RecordPredictions(Callback):
    """After training, the trained model's ``output`` for ``images`` (a predictor tower in-session)."""

    def __init__(self, images: np.ndarray):
        self.images = images
        self.result = None

    def _setup_graph(self):
        self.predict = self.trainer.get_predictor(["input"], ["output"])

    def _after_train(self):
        (self.result,) = self.predict(self.images)


@pytest.mark.data_format
@pytest.mark.timeout(180)
def test_channels_first_resnet_checkpoint_reloads_with_the_same_predictions(tmp_path):
    logdir = tmp_path / "resnet"
    logger.set_logger_dir(str(logdir), action="d")
    towers, batch_size = 2, 16
    train = batches(banded_images(64, (32, 32, 3)), batch_size, train=True)
    probe = np.stack([img for img, _ in banded_images(8, (32, 32, 3), seed=2)])
    recorder = RecordPredictions(probe)
    config = TrainConfig(
        model=PreactResNet(blocks=1, data_format="channels_first"),
        data=QueueInput(train),
        callbacks=[
            ModelSaver(),
            InferenceRunner(
                batches(banded_images(32, (32, 32, 3), seed=1), batch_size, train=False),
                [ScalarStats("cost"), ClassificationError("wrong_vector")],
            ),
            ScheduledHyperParamSetter("learning_rate", [(1, 0.02), (10, 0.002)]),
            recorder,
        ],
        steps_per_epoch=len(train) // towers,
        max_epoch=2,
        session_init=SmartInit(None),
    )
    with tf.Graph().as_default():
        launch_train_with_config(config, SyncMultiGPUTrainerReplicated(towers))
    stats = stats_of(logdir)
    assert {"validation_cost", "validation_error", "train_error", "wd_cost"} <= set(stats[-1])

    # The variables are named as the reference's layers name them, so its tools read the checkpoint.
    ckpt = tf.train.latest_checkpoint(str(logdir))
    names = {name for name, _ in tf.train.list_variables(ckpt)}
    expected = {
        "conv0/W",
        "conv0/bn/mean/EMA",
        "stage3.0/conv2/W",
        "bn_final/bn/gamma",
        "linear/W",
        "learning_rate",
    }
    assert expected <= names, sorted(expected - names)
    assert tf.train.load_variable(ckpt, "learning_rate") == pytest.approx(0.02)

    # Loading the checkpoint (`--load`) gives the trained model's predictions, in either layout.
    for data_format in ("channels_first", "channels_last"):
        predict = OfflinePredictor(
            PredictConfig(
                model=PreactResNet(blocks=1, data_format=data_format),
                input_names=["input"],
                output_names=["output"],
                session_init=SmartInit(ckpt),
            )
        )
        (prob,) = predict(probe)
        np.testing.assert_allclose(prob, recorder.result, atol=1e-5, err_msg=data_format)
