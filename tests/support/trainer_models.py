"""Tiny models and numpy data shared by the trainer tests (both API styles, every InputSource).

- ``blobs`` / ``linear_data``: deterministic numpy data sets.
- ``ArrayBatches``: a duck-typed DataFlow of ``[x, y]`` batches over numpy arrays.
- ``LinearRegression`` and ``SoftmaxClassifier``: ModelDescs whose tensors have fixed names:
  inputs ``x`` and ``y`` / ``label``; outputs ``pred`` / ``prob``; ``cost`` (and ``accuracy``).
"""

from __future__ import annotations

import numpy as np

from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.model_desc import ModelDesc
from towerpack.trainer.summary import add_moving_summary

__all__ = ["ArrayBatches", "LinearRegression", "SoftmaxClassifier", "blobs", "linear_data"]


def blobs(n: int = 512, dim: int = 8, classes: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Well-separated Gaussian blobs: ``x`` float32 [n, dim], ``label`` int32 [n]."""
    rng = np.random.RandomState(seed)
    centers = rng.normal(0.0, 3.0, size=(classes, dim))
    label = rng.randint(0, classes, size=n).astype(np.int32)
    x = (centers[label] + rng.normal(0.0, 1.0, size=(n, dim))).astype(np.float32)
    return x, label


def linear_data(n: int = 256, dim: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Noise-free ``y = x @ w + 0.5``: returns ``x`` [n, dim], ``y`` [n] (float32) and the true ``w``."""
    rng = np.random.RandomState(seed)
    w = rng.normal(size=dim).astype(np.float32)
    x = rng.normal(size=(n, dim)).astype(np.float32)
    return x, (x @ w + 0.5).astype(np.float32), w


class ArrayBatches:
    """Batches ``[a[i:i+b] for a in arrays]`` in order (or shuffled per epoch); last partial batch dropped."""

    def __init__(self, *arrays: np.ndarray, batch_size: int, shuffle: bool = False, seed: int = 0):
        if not arrays or any(len(a) != len(arrays[0]) for a in arrays):
            raise ValueError("ArrayBatches needs arrays of equal length")
        self.arrays = arrays
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.rng = np.random.RandomState(seed)

    def reset_state(self) -> None:
        self.rng = np.random.RandomState(self.seed)

    def __len__(self) -> int:
        return len(self.arrays[0]) // self.batch_size

    def __iter__(self):
        idx = np.arange(len(self.arrays[0]))
        if self.shuffle:
            self.rng.shuffle(idx)
        for k in range(len(self)):
            sel = idx[k * self.batch_size : (k + 1) * self.batch_size]
            yield [a[sel] for a in self.arrays]


class LinearRegression(ModelDesc):
    """``pred = x @ w + b`` with mean-squared-error ``cost``; variables ``w`` [dim] and ``b`` []."""

    def __init__(self, dim: int = 4, lr: float = 0.1, momentum: float = 0.0):
        self.dim = dim
        self.lr = lr
        self.momentum = momentum

    def inputs(self):
        return [tf.TensorSpec([None, self.dim], tf.float32, "x"), tf.TensorSpec([None], tf.float32, "y")]

    def build_graph(self, x, y):
        w = tfv1.get_variable("w", [self.dim], initializer=tfv1.zeros_initializer())
        b = tfv1.get_variable("b", [], initializer=tfv1.zeros_initializer())
        pred = tf.identity(tf.linalg.matvec(x, w) + b, name="pred")
        cost = tf.reduce_mean(tf.square(pred - y), name="cost")
        add_moving_summary(cost)
        return cost

    def optimizer(self):
        if self.momentum:
            return tfv1.train.MomentumOptimizer(self.lr, self.momentum)
        return tfv1.train.GradientDescentOptimizer(self.lr)


class SoftmaxClassifier(ModelDesc):
    """Softmax regression: output ``prob``, scalars ``cost`` and ``accuracy``; Momentum optimizer
    (so checkpoints carry optimizer slots). The learning rate is the variable ``learning_rate``."""

    def __init__(self, dim: int = 8, classes: int = 3, lr: float = 0.1, momentum: float = 0.9):
        self.dim = dim
        self.classes = classes
        self.lr = lr
        self.momentum = momentum

    def inputs(self):
        return [tf.TensorSpec([None, self.dim], tf.float32, "x"), tf.TensorSpec([None], tf.int32, "label")]

    def build_graph(self, x, label):
        w = tfv1.get_variable("W", [self.dim, self.classes], initializer=tfv1.zeros_initializer())
        b = tfv1.get_variable("b", [self.classes], initializer=tfv1.zeros_initializer())
        logits = tf.matmul(x, w) + b
        tf.nn.softmax(logits, name="prob")
        cost = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=logits), name="cost"
        )
        correct = tf.cast(tf.equal(tf.argmax(logits, axis=1, output_type=tf.int32), label), tf.float32)
        accuracy = tf.reduce_mean(correct, name="accuracy")
        add_moving_summary(cost, accuracy)
        return cost

    def optimizer(self):
        lr = tfv1.get_variable("learning_rate", initializer=self.lr, trainable=False)
        return tfv1.train.MomentumOptimizer(lr, self.momentum)
