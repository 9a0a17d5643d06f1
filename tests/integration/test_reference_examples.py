# ruff: noqa: F403, F405, E741  (star imports and names as the reference scripts have them)
"""The model code of the reference's examples, ported by changing imports only (as
docs/migrating.md says), trains under the trainers those scripts use.

Each model below is the model of one reference script, written with the same API calls and
argument forms: `examples/basics/mnist-convnet.py`, `examples/basics/cifar-convnet.py` and
`examples/ResNet/cifar10-resnet.py`. What differs from the scripts: the imports; in-memory
random data instead of the dataset downloads; a few steps instead of hundreds of epochs; and the
ResNet's `assert tf.test.is_gpu_available()` (its NCHW layout runs on the CPU here as it is).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

# The imports, as docs/migrating.md maps them.
import tensorflow.compat.v1 as tf

from towerpack.dataflow import *
from towerpack.trainer import *
from towerpack.trainer import summary
from towerpack.trainer.devices import get_num_gpu
from towerpack.trainer.summary import *

pytestmark = pytest.mark.slow


def images(n, shape, classes=10, seed=0):
    """``[image, label]`` datapoints whose label is a bright row (so a few steps learn)."""
    rng = np.random.RandomState(seed)
    points = []
    for _ in range(n):
        label = rng.randint(classes)
        img = rng.uniform(0, 0.2, size=shape).astype(np.float32)
        img[2 * label] += 0.8
        points.append([img, np.int32(label)])
    return points


# ---- examples/basics/mnist-convnet.py --------------------------------------------------------

IMAGE_SIZE = 28


class MnistModel(ModelDesc):
    def inputs(self):
        return [
            tf.placeholder(tf.float32, (None, IMAGE_SIZE, IMAGE_SIZE), "input"),
            tf.placeholder(tf.int32, (None,), "label"),
        ]

    def build_graph(self, image, label):
        image = tf.expand_dims(image, 3)
        image = image * 2 - 1
        with argscope(Conv2D, kernel_size=3, activation=tf.nn.relu, filters=32):
            logits = (
                LinearWrap(image)
                .Conv2D("conv0")
                .MaxPooling("pool0", 2)
                .Conv2D("conv1")
                .Conv2D("conv2")
                .MaxPooling("pool1", 2)
                .Conv2D("conv3")
                .FullyConnected("fc0", 512, activation=tf.nn.relu)
                .Dropout("dropout", rate=0.5)
                .FullyConnected("fc1", 10, activation=tf.identity)()
            )
        cost = tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label)
        cost = tf.reduce_mean(cost, name="cross_entropy_loss")
        correct = tf.cast(tf.nn.in_top_k(logits, label, 1), tf.float32, name="correct")
        accuracy = tf.reduce_mean(correct, name="accuracy")
        train_error = tf.reduce_mean(1 - correct, name="train_error")
        summary.add_moving_summary(train_error, accuracy)
        wd_cost = tf.multiply(1e-5, regularize_cost("fc.*/W", tf.nn.l2_loss), name="regularize_loss")
        total_cost = tf.add_n([wd_cost, cost], name="total_cost")
        summary.add_moving_summary(cost, wd_cost, total_cost)
        summary.add_param_summary((".*/W", ["histogram", "rms"]))
        return total_cost

    def optimizer(self):
        lr = tf.train.exponential_decay(
            learning_rate=1e-3,
            global_step=get_global_step_var(),
            decay_steps=468 * 10,
            decay_rate=0.3,
            staircase=True,
            name="learning_rate",
        )
        tf.summary.scalar("lr", lr)
        return tf.train.AdamOptimizer(lr)


@pytest.mark.timeout(120)
def test_mnist_convnet(tmp_path):
    logger.set_logger_dir(str(tmp_path / "mnist"), action="d")
    dataset_train = BatchData(DataFromList(images(128, (28, 28)), shuffle=True), 32)
    dataset_test = BatchData(DataFromList(images(64, (28, 28), seed=1), shuffle=False), 32, remainder=True)
    dataset_train = PrintData(dataset_train)
    config = TrainConfig(
        model=MnistModel(),
        data=FeedInput(dataset_train),
        callbacks=[
            ModelSaver(),
            InferenceRunner(dataset_test, ScalarStats(["cross_entropy_loss", "accuracy"], prefix="val")),
            MaxSaver("val_accuracy"),
        ],
        steps_per_epoch=len(dataset_train),
        max_epoch=3,
    )
    with tf.Graph().as_default():
        launch_train_with_config(config, SimpleTrainer())
    stats = json.loads((tmp_path / "mnist" / "stats.json").read_text())
    assert {"val_accuracy", "val_cross_entropy_loss", "train_error", "total_cost", "lr"} <= set(stats[-1])
    assert stats[-1]["val_cross_entropy_loss"] < stats[0]["val_cross_entropy_loss"]
    assert list((tmp_path / "mnist").glob("max-val_accuracy*"))


# ---- examples/basics/cifar-convnet.py --------------------------------------------------------


class CifarConvModel(ModelDesc):
    def __init__(self, cifar_classnum):
        super().__init__()
        self.cifar_classnum = cifar_classnum

    def inputs(self):
        return [
            tf.placeholder(tf.float32, (None, 30, 30, 3), "input"),
            tf.placeholder(tf.int32, (None,), "label"),
        ]

    def build_graph(self, image, label):
        is_training = get_current_tower_context().is_training
        drop_rate = tf.constant(0.5 if is_training else 0.0)

        if is_training:
            tf.summary.image("train_image", image, 10)
        if tf.test.is_gpu_available():
            image = tf.transpose(image, [0, 3, 1, 2])
            data_format = "channels_first"
        else:
            data_format = "channels_last"

        image = image / 4.0
        with (
            argscope(Conv2D, activation=BNReLU, use_bias=False, kernel_size=3),
            argscope([Conv2D, MaxPooling, BatchNorm], data_format=data_format),
        ):
            logits = (
                LinearWrap(image)
                .Conv2D("conv1.1", filters=64)
                .Conv2D("conv1.2", filters=64)
                .MaxPooling("pool1", 3, stride=2, padding="SAME")
                .Conv2D("conv2.1", filters=128)
                .Conv2D("conv2.2", filters=128)
                .MaxPooling("pool2", 3, stride=2, padding="SAME")
                .Conv2D("conv3.1", filters=128, padding="VALID")
                .Conv2D("conv3.2", filters=128, padding="VALID")
                .FullyConnected("fc0", 1024 + 512, activation=tf.nn.relu)
                .Dropout(rate=drop_rate)
                .FullyConnected("fc1", 512, activation=tf.nn.relu)
                .FullyConnected("linear", out_dim=self.cifar_classnum)()
            )
        cost = tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label)
        cost = tf.reduce_mean(cost, name="cross_entropy_loss")
        correct = tf.cast(tf.nn.in_top_k(logits, label, 1), tf.float32, name="correct")
        add_moving_summary(tf.reduce_mean(correct, name="accuracy"))
        wd_cost = regularize_cost("fc.*/W", l2_regularizer(4e-4), name="regularize_loss")
        add_moving_summary(cost, wd_cost)
        add_param_summary((".*/W", ["histogram"]))
        return tf.add_n([cost, wd_cost], name="cost")

    def optimizer(self):
        lr = tf.get_variable("learning_rate", initializer=1e-2, trainable=False)
        tf.summary.scalar("lr", lr)
        return tf.train.AdamOptimizer(lr, epsilon=1e-3)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("num_gpu", ["detected", 2])
def test_cifar_convnet(tmp_path, num_gpu):
    logger.set_logger_dir(str(tmp_path / "cifar"), action="d")
    dataset_train = BatchData(DataFromList(images(64, (30, 30, 3)), shuffle=True), 16)
    dataset_test = BatchData(DataFromList(images(32, (30, 30, 3), seed=1), shuffle=False), 16, remainder=True)

    def lr_func(lr):
        if lr < 3e-5:
            raise StopTraining()
        return lr * 0.31

    config = TrainConfig(
        model=CifarConvModel(10),
        data=QueueInput(dataset_train),
        callbacks=[
            ModelSaver(),
            InferenceRunner(dataset_test, ScalarStats(["accuracy", "cost"])),
            StatMonitorParamSetter(
                "learning_rate", "validation_accuracy", lr_func, threshold=0.001, last_k=10, reverse=True
            ),
        ],
        max_epoch=2,
    )
    num_gpu = get_num_gpu() if num_gpu == "detected" else num_gpu
    with tf.Graph().as_default():
        trainer = SimpleTrainer() if num_gpu <= 1 else SyncMultiGPUTrainerParameterServer(num_gpu)
        launch_train_with_config(config, trainer)
    stats = json.loads((tmp_path / "cifar" / "stats.json").read_text())
    assert {"validation_accuracy", "validation_cost", "accuracy", "regularize_loss", "lr"} <= set(stats[-1])
    assert np.isfinite(stats[-1]["validation_cost"])


# ---- examples/ResNet/cifar10-resnet.py -------------------------------------------------------

BATCH_SIZE = 16


class ResNetModel(ModelDesc):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def inputs(self):
        return [
            tf.TensorSpec([None, 32, 32, 3], tf.float32, "input"),
            tf.TensorSpec([None], tf.int32, "label"),
        ]

    def build_graph(self, image, label):
        image = image / 128.0
        image = tf.transpose(image, [0, 3, 1, 2])

        def residual(name, l, increase_dim=False, first=False):
            shape = l.get_shape().as_list()
            in_channel = shape[1]
            if increase_dim:
                out_channel = in_channel * 2
                stride1 = 2
            else:
                out_channel = in_channel
                stride1 = 1
            with tf.variable_scope(name):
                b1 = l if first else BNReLU(l)
                c1 = Conv2D("conv1", b1, out_channel, strides=stride1, activation=BNReLU)
                c2 = Conv2D("conv2", c1, out_channel)
                if increase_dim:
                    l = AvgPooling("pool", l, 2)
                    l = tf.pad(l, [[0, 0], [in_channel // 2, in_channel // 2], [0, 0], [0, 0]])
                l = c2 + l
                return l

        with (
            argscope([Conv2D, AvgPooling, BatchNorm, GlobalAvgPooling], data_format="channels_first"),
            argscope(
                Conv2D,
                use_bias=False,
                kernel_size=3,
                kernel_initializer=tf.variance_scaling_initializer(scale=2.0, mode="fan_out"),
            ),
        ):
            l = Conv2D("conv0", image, 16, activation=BNReLU)
            l = residual("res1.0", l, first=True)
            for k in range(1, self.n):
                l = residual(f"res1.{k}", l)
            l = residual("res2.0", l, increase_dim=True)
            for k in range(1, self.n):
                l = residual(f"res2.{k}", l)
            l = residual("res3.0", l, increase_dim=True)
            for k in range(1, self.n):
                l = residual("res3." + str(k), l)
            l = BNReLU("bnlast", l)
            l = GlobalAvgPooling("gap", l)
        logits = FullyConnected("linear", l, 10)
        tf.nn.softmax(logits, name="output")

        cost = tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label)
        cost = tf.reduce_mean(cost, name="cross_entropy_loss")
        wrong = tf.cast(tf.logical_not(tf.nn.in_top_k(logits, label, 1)), tf.float32, name="wrong_vector")
        add_moving_summary(tf.reduce_mean(wrong, name="train_error"))
        wd_w = tf.train.exponential_decay(0.0002, get_global_step_var(), 480000, 0.2, True)
        wd_cost = tf.multiply(wd_w, regularize_cost(".*/W", tf.nn.l2_loss), name="wd_cost")
        add_moving_summary(cost, wd_cost)
        add_param_summary((".*/W", ["histogram"]))
        return tf.add_n([cost, wd_cost], name="cost")

    def optimizer(self):
        lr = tf.get_variable("learning_rate", initializer=0.01, trainable=False)
        opt = tf.train.MomentumOptimizer(lr, 0.9)
        return opt


@pytest.mark.timeout(180)
@pytest.mark.parametrize("towers", ["detected", 2])
def test_cifar10_resnet_and_resume_from_its_checkpoint(tmp_path, towers):
    logdir = tmp_path / "resnet"
    logger.set_logger_dir(str(logdir), action="d")
    dataset_train = BatchData(DataFromList(images(64, (32, 32, 3)), shuffle=True), BATCH_SIZE)
    dataset_test = BatchData(
        DataFromList(images(32, (32, 32, 3), seed=1), shuffle=False), BATCH_SIZE, remainder=True
    )
    towers = max(get_num_gpu(), 1) if towers == "detected" else towers
    config = TrainConfig(
        model=ResNetModel(n=1),
        data=QueueInput(dataset_train),
        callbacks=[
            ModelSaver(),
            InferenceRunner(dataset_test, [ScalarStats("cost"), ClassificationError("wrong_vector")]),
            ScheduledHyperParamSetter("learning_rate", [(1, 0.1), (2, 0.01), (123, 0.001), (300, 0.0002)]),
        ],
        steps_per_epoch=len(dataset_train) // towers,
        max_epoch=2,
        session_init=SmartInit(None),
    )
    with tf.Graph().as_default():
        launch_train_with_config(config, SyncMultiGPUTrainerReplicated(towers))
    stats = json.loads((logdir / "stats.json").read_text())
    assert {"validation_cost", "validation_error", "train_error", "wd_cost"} <= set(stats[-1])
    ckpt = tf.train.latest_checkpoint(str(logdir))
    names = {n for n, _ in tf.train.list_variables(ckpt)}
    assert {
        "conv0/W",
        "conv0/bn/mean/EMA",
        "res3.0/conv2/W",
        "bnlast/bn/gamma",
        "linear/W",
        "learning_rate",
    } <= names
    # `--load`: the checkpoint initializes the same model for prediction.
    pred = OfflinePredictor(
        PredictConfig(
            model=ResNetModel(n=1),
            input_names=["input"],
            output_names=["output"],
            session_init=SmartInit(ckpt),
        )
    )
    prob = pred(np.stack([p[0] for p in images(4, (32, 32, 3))]))[0]
    np.testing.assert_allclose(prob.sum(axis=1), 1.0, rtol=1e-5)
