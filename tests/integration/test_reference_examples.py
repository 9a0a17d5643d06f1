# ruff: noqa: E501  (the reference's own long lines, inside the *_SOURCE strings)
"""The model code of the reference's examples, unchanged but for its imports (as docs/migrating.md
maps them), trains under the trainers those scripts use.

Each ``*_SOURCE`` below is one reference script from its imports to the end of its ``Model``
class, byte for byte but for the import lines: `examples/basics/mnist-convnet.py` (the revision
whose ``inputs()`` returns placeholders, and an older one written with ``_get_inputs`` and
``InputDesc``, ``_build_graph`` setting ``self.cost`` and ``_get_optimizer``; its import of
``InputDesc`` is spelled out), `examples/basics/cifar-convnet.py` (which reads ``self.training``)
and `examples/ResNet/cifar10-resnet.py`. Each runs as a module of its own, because every script
names its class ``Model`` and calls ``super(Model, self)``.

What the tests change around that code: in-memory random data instead of the dataset downloads,
a few steps instead of hundreds of epochs. One line cannot run as written on a machine without a
GPU: cifar10-resnet's ``assert tf.test.is_gpu_available()`` (it guarded the channels_first layout,
which TF1's CPU kernels lacked; towerpack's layers run it on the CPU), so its test answers that
call with True. cifar-convnet's ``if tf.test.is_gpu_available():`` runs as written and picks
channels_last here.
"""

from __future__ import annotations

import json
import linecache
import types

import numpy as np
import pytest
import tensorflow.compat.v1 as tf

from towerpack.dataflow import BatchData, DataFromList, PrintData
from towerpack.trainer import (
    ClassificationError,
    FeedInput,
    InferenceRunner,
    MaxSaver,
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
    launch_train_with_config,
    logger,
)
from towerpack.trainer.devices import get_num_gpu

pytestmark = pytest.mark.slow


def reference_module(name: str, source: str) -> types.ModuleType:
    """Run a reference script's code as module ``name``; tracebacks show its lines."""
    filename = f"<reference {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(name)
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


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


def image_summaries(graph) -> list[str]:
    return sorted(op.name for op in graph.get_operations() if op.type == "ImageSummary")


# ---- examples/basics/mnist-convnet.py --------------------------------------------------------

MNIST_SOURCE = r'''
import tensorflow.compat.v1 as tf

from towerpack.dataflow import *
from towerpack.trainer import *
from towerpack.dataflow import dataset
from towerpack.trainer import summary

"""
MNIST ConvNet example.
about 0.6% validation error after 30 epochs.
"""

IMAGE_SIZE = 28


class Model(ModelDesc):
    def inputs(self):
        """
        Define all the inputs (with type, shape, name) that the graph will need.
        """
        return [tf.placeholder(tf.float32, (None, IMAGE_SIZE, IMAGE_SIZE), 'input'),
                tf.placeholder(tf.int32, (None,), 'label')]

    def build_graph(self, image, label):
        """This function should build the model which takes the input variables
        and return cost at the end"""

        # In tensorflow, inputs to convolution function are assumed to be
        # NHWC. Add a single channel here.
        image = tf.expand_dims(image, 3)

        image = image * 2 - 1   # center the pixels values at zero
        # The context manager `argscope` sets the default option for all the layers under
        # this context. Here we use 32 channel convolution with shape 3x3
        with argscope(Conv2D, kernel_size=3, activation=tf.nn.relu, filters=32):
            logits = (LinearWrap(image)
                      .Conv2D('conv0')
                      .MaxPooling('pool0', 2)
                      .Conv2D('conv1')
                      .Conv2D('conv2')
                      .MaxPooling('pool1', 2)
                      .Conv2D('conv3')
                      .FullyConnected('fc0', 512, activation=tf.nn.relu)
                      .Dropout('dropout', rate=0.5)
                      .FullyConnected('fc1', 10, activation=tf.identity)())

        # a vector of length B with loss of each sample
        cost = tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label)
        cost = tf.reduce_mean(cost, name='cross_entropy_loss')  # the average cross-entropy loss

        correct = tf.cast(tf.nn.in_top_k(logits, label, 1), tf.float32, name='correct')
        accuracy = tf.reduce_mean(correct, name='accuracy')

        # This will monitor training error & accuracy (in a moving average fashion). The value will be automatically
        # 1. written to tensosrboard
        # 2. written to stat.json
        # 3. printed after each epoch
        train_error = tf.reduce_mean(1 - correct, name='train_error')
        summary.add_moving_summary(train_error, accuracy)

        # Use a regex to find parameters to apply weight decay.
        # Here we apply a weight decay on all W (weight matrix) of all fc layers
        # If you don't like regex, you can certainly define the cost in any other methods.
        wd_cost = tf.multiply(1e-5,
                              regularize_cost('fc.*/W', tf.nn.l2_loss),
                              name='regularize_loss')
        total_cost = tf.add_n([wd_cost, cost], name='total_cost')
        summary.add_moving_summary(cost, wd_cost, total_cost)

        # monitor histogram of all weight (of conv and fc layers) in tensorboard
        summary.add_param_summary(('.*/W', ['histogram', 'rms']))
        # the function should return the total cost to be optimized
        return total_cost

    def optimizer(self):
        lr = tf.train.exponential_decay(
            learning_rate=1e-3,
            global_step=get_global_step_var(),
            decay_steps=468 * 10,
            decay_rate=0.3, staircase=True, name='learning_rate')
        # This will also put the summary in tensorboard, stat.json and print in terminal,
        # but this time without moving average
        tf.summary.scalar('lr', lr)
        return tf.train.AdamOptimizer(lr)
'''
mnist_convnet = reference_module("mnist-convnet", MNIST_SOURCE)


@pytest.mark.timeout(120)
def test_mnist_convnet(tmp_path):
    logger.set_logger_dir(str(tmp_path / "mnist"), action="d")
    dataset_train = BatchData(DataFromList(images(128, (28, 28)), shuffle=True), 32)
    dataset_test = BatchData(DataFromList(images(64, (28, 28), seed=1), shuffle=False), 32, remainder=True)
    dataset_train = PrintData(dataset_train)
    config = TrainConfig(
        model=mnist_convnet.Model(),
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


# ---- examples/basics/mnist-convnet.py, an older revision (the API of 2017) ----------------------

MNIST_OLD_SOURCE = r'''
import os
import argparse
import tensorflow.compat.v1 as tf
"""
MNIST ConvNet example.
about 0.6% validation error after 30 epochs.
"""


# Just import everything into current namespace
from towerpack.dataflow import *
from towerpack.trainer import *
from towerpack.trainer.model_desc import InputDesc
from towerpack.trainer import summary
from towerpack.dataflow import dataset

IMAGE_SIZE = 28


class Model(ModelDesc):
    def _get_inputs(self):
        """
        Define all the inputs (with type, shape, name) that
        the graph will need.
        """
        return [InputDesc(tf.float32, (None, IMAGE_SIZE, IMAGE_SIZE), 'input'),
                InputDesc(tf.int32, (None,), 'label')]

    def _build_graph(self, inputs):
        """This function should build the model which takes the input variables
        and define self.cost at the end"""

        # inputs contains a list of input variables defined above
        image, label = inputs

        # In tensorflow, inputs to convolution function are assumed to be
        # NHWC. Add a single channel here.
        image = tf.expand_dims(image, 3)

        image = image * 2 - 1   # center the pixels values at zero

        # The context manager `argscope` sets the default option for all the layers under
        # this context. Here we use 32 channel convolution with shape 3x3
        with argscope(Conv2D, kernel_shape=3, nl=tf.nn.relu, out_channel=32):
            logits = (LinearWrap(image)
                      .Conv2D('conv0')
                      .MaxPooling('pool0', 2)
                      .Conv2D('conv1')
                      .Conv2D('conv2')
                      .MaxPooling('pool1', 2)
                      .Conv2D('conv3')
                      .FullyConnected('fc0', 512, activation=tf.nn.relu)
                      .Dropout('dropout', 0.5)
                      .FullyConnected('fc1', 10, activation=tf.identity)())

        tf.nn.softmax(logits, name='prob')   # a Bx10 with probabilities

        # a vector of length B with loss of each sample
        cost = tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label)
        cost = tf.reduce_mean(cost, name='cross_entropy_loss')  # the average cross-entropy loss

        correct = tf.cast(tf.nn.in_top_k(logits, label, 1), tf.float32, name='correct')
        accuracy = tf.reduce_mean(correct, name='accuracy')

        # This will monitor training error (in a moving_average fashion):
        # 1. write the value to tensosrboard
        # 2. write the value to stat.json
        # 3. print the value after each epoch
        train_error = tf.reduce_mean(1 - correct, name='train_error')
        summary.add_moving_summary(train_error, accuracy)

        # Use a regex to find parameters to apply weight decay.
        # Here we apply a weight decay on all W (weight matrix) of all fc layers
        wd_cost = tf.multiply(1e-5,
                              regularize_cost('fc.*/W', tf.nn.l2_loss),
                              name='regularize_loss')
        self.cost = tf.add_n([wd_cost, cost], name='total_cost')
        summary.add_moving_summary(cost, wd_cost, self.cost)

        # monitor histogram of all weight (of conv and fc layers) in tensorboard
        summary.add_param_summary(('.*/W', ['histogram', 'rms']))

    def _get_optimizer(self):
        lr = tf.train.exponential_decay(
            learning_rate=1e-3,
            global_step=get_global_step_var(),
            decay_steps=468 * 10,
            decay_rate=0.3, staircase=True, name='learning_rate')
        # This will also put the summary in tensorboard, stat.json and print in terminal
        # but this time without moving average
        tf.summary.scalar('lr', lr)
        return tf.train.AdamOptimizer(lr)
'''
mnist_convnet_old = reference_module("mnist-convnet-old", MNIST_OLD_SOURCE)


@pytest.mark.timeout(120)
def test_mnist_convnet_older_revision(tmp_path):
    logger.set_logger_dir(str(tmp_path / "mnist-old"), action="d")
    dataset_train = BatchData(DataFromList(images(128, (28, 28)), shuffle=True), 32)
    dataset_test = BatchData(DataFromList(images(64, (28, 28), seed=1), shuffle=False), 32, remainder=True)
    model = mnist_convnet_old.Model()
    config = TrainConfig(
        model=model,
        dataflow=dataset_train,
        callbacks=[
            ModelSaver(),
            MaxSaver("validation_accuracy"),
            InferenceRunner(dataset_test, ScalarStats(["cross_entropy_loss", "accuracy"])),
        ],
        steps_per_epoch=len(dataset_train),
        max_epoch=3,
    )
    assert model.input_names == ["input", "label"]
    with tf.Graph().as_default():
        launch_train_with_config(config, SimpleTrainer())
    stats = json.loads((tmp_path / "mnist-old" / "stats.json").read_text())
    assert {"validation_accuracy", "train_error", "total_cost", "lr"} <= set(stats[-1])
    assert stats[-1]["validation_cross_entropy_loss"] < stats[0]["validation_cross_entropy_loss"]
    pred = OfflinePredictor(
        PredictConfig(
            model=mnist_convnet_old.Model(),
            input_names=["input"],
            output_names=["prob"],
            session_init=SmartInit(str(tmp_path / "mnist-old")),
        )
    )
    (prob,) = pred(np.stack([p[0] for p in images(4, (28, 28))]))
    assert prob.shape == (4, 10)
    np.testing.assert_allclose(prob.sum(axis=1), 1.0, rtol=1e-5)


# ---- examples/basics/cifar-convnet.py --------------------------------------------------------

CIFAR_SOURCE = r'''
import argparse
import os
import tensorflow.compat.v1 as tf

from towerpack.dataflow import *
from towerpack.trainer import *
from towerpack.dataflow import dataset
from towerpack.trainer.summary import *
from towerpack.trainer.devices import get_num_gpu


"""
A small convnet model for Cifar10 or Cifar100 dataset.

Cifar10 trained on 1 GPU:
    91% accuracy after 50k iterations.
    79 itr/s on P100

Not a good model for Cifar100, just for demonstration.
"""


class Model(ModelDesc):
    def __init__(self, cifar_classnum):
        super(Model, self).__init__()
        self.cifar_classnum = cifar_classnum

    def inputs(self):
        return [tf.TensorSpec((None, 30, 30, 3), tf.float32, 'input'),
                tf.TensorSpec((None,), tf.int32, 'label')]

    def build_graph(self, image, label):
        drop_rate = tf.constant(0.5 if self.training else 0.0)

        if self.training:
            tf.summary.image("train_image", image, 10)
        if tf.test.is_gpu_available():
            image = tf.transpose(image, [0, 3, 1, 2])
            data_format = 'channels_first'
        else:
            data_format = 'channels_last'

        image = image / 4.0     # just to make range smaller
        with argscope(Conv2D, activation=BNReLU, use_bias=False, kernel_size=3), \
                argscope([Conv2D, MaxPooling, BatchNorm], data_format=data_format):
            logits = LinearWrap(image) \
                .Conv2D('conv1.1', filters=64) \
                .Conv2D('conv1.2', filters=64) \
                .MaxPooling('pool1', 3, stride=2, padding='SAME') \
                .Conv2D('conv2.1', filters=128) \
                .Conv2D('conv2.2', filters=128) \
                .MaxPooling('pool2', 3, stride=2, padding='SAME') \
                .Conv2D('conv3.1', filters=128, padding='VALID') \
                .Conv2D('conv3.2', filters=128, padding='VALID') \
                .FullyConnected('fc0', 1024 + 512, activation=tf.nn.relu) \
                .Dropout(rate=drop_rate) \
                .FullyConnected('fc1', 512, activation=tf.nn.relu) \
                .FullyConnected('linear', out_dim=self.cifar_classnum)()

        cost = tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label)
        cost = tf.reduce_mean(cost, name='cross_entropy_loss')

        correct = tf.cast(tf.nn.in_top_k(predictions=logits, targets=label, k=1), tf.float32, name='correct')
        # monitor training error
        add_moving_summary(tf.reduce_mean(correct, name='accuracy'))

        # weight decay on all W of fc layers
        wd_cost = regularize_cost('fc.*/W', l2_regularizer(4e-4), name='regularize_loss')
        add_moving_summary(cost, wd_cost)

        add_param_summary(('.*/W', ['histogram']))   # monitor W
        return tf.add_n([cost, wd_cost], name='cost')

    def optimizer(self):
        lr = tf.get_variable('learning_rate', initializer=1e-2, trainable=False)
        tf.summary.scalar('lr', lr)
        return tf.train.AdamOptimizer(lr, epsilon=1e-3)
'''
cifar_convnet = reference_module("cifar-convnet", CIFAR_SOURCE)


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
        model=cifar_convnet.Model(10),
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
    with tf.Graph().as_default() as graph:
        trainer = SimpleTrainer() if num_gpu <= 1 else SyncMultiGPUTrainerParameterServer(num_gpu)
        launch_train_with_config(config, trainer)
    # `if self.training:` added the image summary in each training tower, not in the inference tower.
    summaries = image_summaries(graph)
    assert len(summaries) == max(num_gpu, 1)
    assert all(name.endswith("train_image") and "Infer" not in name for name in summaries)
    stats = json.loads((tmp_path / "cifar" / "stats.json").read_text())
    assert {"validation_accuracy", "validation_cost", "accuracy", "regularize_loss", "lr"} <= set(stats[-1])
    assert np.isfinite(stats[-1]["validation_cost"])


# ---- examples/ResNet/cifar10-resnet.py -------------------------------------------------------

RESNET_SOURCE = r'''
import argparse
import os
import tensorflow.compat.v1 as tf

from towerpack.dataflow import *
from towerpack.trainer import *
from towerpack.dataflow import dataset
from towerpack.trainer.summary import add_moving_summary, add_param_summary
from towerpack.trainer.devices import get_num_gpu

"""
CIFAR10 ResNet example. See:
Deep Residual Learning for Image Recognition, arxiv:1512.03385
This implementation uses the variants proposed in:
Identity Mappings in Deep Residual Networks, arxiv:1603.05027

I can reproduce the results on 2 TitanX for
n=5, about 7.1% val error after 67k steps (20.4 step/s)
n=18, about 5.95% val error after 80k steps (5.6 step/s, not converged)
n=30: a 182-layer network, about 5.6% val error after 51k steps (3.4 step/s)
This model uses the whole training set instead of a train-val split.

To train:
    ./cifar10-resnet.py --gpu 0,1
"""

BATCH_SIZE = 128
NUM_UNITS = None


class Model(ModelDesc):

    def __init__(self, n):
        super(Model, self).__init__()
        self.n = n

    def inputs(self):
        return [tf.placeholder(tf.float32, [None, 32, 32, 3], 'input'),
                tf.placeholder(tf.int32, [None], 'label')]

    def build_graph(self, image, label):
        image = image / 128.0
        assert tf.test.is_gpu_available()
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
                c1 = Conv2D('conv1', b1, out_channel, strides=stride1, activation=BNReLU)
                c2 = Conv2D('conv2', c1, out_channel)
                if increase_dim:
                    l = AvgPooling('pool', l, 2)
                    l = tf.pad(l, [[0, 0], [in_channel // 2, in_channel // 2], [0, 0], [0, 0]])

                l = c2 + l
                return l

        with argscope([Conv2D, AvgPooling, BatchNorm, GlobalAvgPooling], data_format='channels_first'), \
                argscope(Conv2D, use_bias=False, kernel_size=3,
                         kernel_initializer=tf.variance_scaling_initializer(scale=2.0, mode='fan_out')):
            l = Conv2D('conv0', image, 16, activation=BNReLU)
            l = residual('res1.0', l, first=True)
            for k in range(1, self.n):
                l = residual('res1.{}'.format(k), l)
            # 32,c=16

            l = residual('res2.0', l, increase_dim=True)
            for k in range(1, self.n):
                l = residual('res2.{}'.format(k), l)
            # 16,c=32

            l = residual('res3.0', l, increase_dim=True)
            for k in range(1, self.n):
                l = residual('res3.' + str(k), l)
            l = BNReLU('bnlast', l)
            # 8,c=64
            l = GlobalAvgPooling('gap', l)

        logits = FullyConnected('linear', l, 10)
        tf.nn.softmax(logits, name='output')

        cost = tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label)
        cost = tf.reduce_mean(cost, name='cross_entropy_loss')

        wrong = tf.cast(tf.logical_not(tf.nn.in_top_k(logits, label, 1)), tf.float32, name='wrong_vector')
        # monitor training error
        add_moving_summary(tf.reduce_mean(wrong, name='train_error'))

        # weight decay on all W of fc layers
        wd_w = tf.train.exponential_decay(0.0002, get_global_step_var(),
                                          480000, 0.2, True)
        wd_cost = tf.multiply(wd_w, regularize_cost('.*/W', tf.nn.l2_loss), name='wd_cost')
        add_moving_summary(cost, wd_cost)

        add_param_summary(('.*/W', ['histogram']))   # monitor W
        return tf.add_n([cost, wd_cost], name='cost')

    def optimizer(self):
        lr = tf.get_variable('learning_rate', initializer=0.01, trainable=False)
        opt = tf.train.MomentumOptimizer(lr, 0.9)
        return opt
'''
cifar10_resnet = reference_module("cifar10-resnet", RESNET_SOURCE)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("towers", ["detected", 2])
def test_cifar10_resnet_and_resume_from_its_checkpoint(tmp_path, towers, monkeypatch):
    # The script's `assert tf.test.is_gpu_available()` (see the module docstring).
    monkeypatch.setattr(tf.test, "is_gpu_available", lambda *args, **kwargs: True)
    logdir = tmp_path / "resnet"
    logger.set_logger_dir(str(logdir), action="d")
    batch_size = 16
    dataset_train = BatchData(DataFromList(images(64, (32, 32, 3)), shuffle=True), batch_size)
    dataset_test = BatchData(
        DataFromList(images(32, (32, 32, 3), seed=1), shuffle=False), batch_size, remainder=True
    )
    towers = max(get_num_gpu(), 1) if towers == "detected" else towers
    config = TrainConfig(
        model=cifar10_resnet.Model(n=1),
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
            model=cifar10_resnet.Model(n=1),
            input_names=["input"],
            output_names=["output"],
            session_init=SmartInit(ckpt),
        )
    )
    prob = pred(np.stack([p[0] for p in images(4, (32, 32, 3))]))[0]
    np.testing.assert_allclose(prob.sum(axis=1), 1.0, rtol=1e-5)
