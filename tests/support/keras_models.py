"""A small tf-keras classifier (Dense + BatchNormalization + Dropout) and its data, for the Keras tests.

``get_model`` builds the model on the tower's input tensor; ``numpy_forward`` computes what the
trained model predicts in inference mode (moving statistics, no dropout) from its variables, as
an oracle independent of Keras and of the towers; ``Snapshot`` records every variable.
"""

from __future__ import annotations

import numpy as np
import tf_keras as keras

from towerpack.trainer.callbacks.base import Callback
from towerpack.trainer.compat import tf, tfv1

DIM, HIDDEN, CLASSES = 6, 16, 3
BN_EPSILON = 1e-3
INPUT_SIGNATURE = [tf.TensorSpec([None, DIM], tf.float32, "x")]
TARGET_SIGNATURE = [tf.TensorSpec([None, CLASSES], tf.float32, "y")]
# The variables of the model as a single-tower model names them.
TRAINABLE = ("dense/kernel", "dense/bias", "bn/gamma", "bn/beta", "probs/kernel", "probs/bias")
MOVING = ("bn/moving_mean", "bn/moving_variance")


def keras_data(n: int = 192, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Inputs far from zero mean and unit scale (so batch-norm statistics move), one-hot labels."""
    rng = np.random.RandomState(seed)
    x = (rng.normal(size=(n, DIM)) * 3.0 + 2.0).astype(np.float32)
    label = (x[:, 0] > 2.0).astype(np.int64) + (x[:, 1] > 2.0).astype(np.int64)
    return x, np.eye(CLASSES, dtype=np.float32)[label]


def get_model(x, seed: int = 1):
    """The classifier, built on the tower's input tensor ``x``."""
    inp = keras.Input(tensor=x)
    init = keras.initializers.GlorotUniform(seed=seed)
    h = keras.layers.Dense(
        HIDDEN,
        activation="relu",
        kernel_initializer=init,
        kernel_regularizer=keras.regularizers.l2(1e-3),
        name="dense",
    )(inp)
    # A short memory, so that the moving statistics catch up within the few steps of a test.
    h = keras.layers.BatchNormalization(name="bn", momentum=0.6, epsilon=BN_EPSILON)(h)
    h = keras.layers.Dropout(0.3, seed=seed)(h)
    out = keras.layers.Dense(CLASSES, activation="softmax", kernel_initializer=init, name="probs")(h)
    return keras.Model(inp, out)


def numpy_forward(v: dict, x: np.ndarray) -> np.ndarray:
    """The model's inference-mode output from the values ``v`` of its variables (by name)."""
    h = np.maximum(x @ v["dense/kernel"] + v["dense/bias"], 0.0)
    h = (h - v["bn/moving_mean"]) / np.sqrt(v["bn/moving_variance"] + BN_EPSILON)
    h = h * v["bn/gamma"] + v["bn/beta"]
    logits = h @ v["probs/kernel"] + v["probs/bias"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


class Snapshot(Callback):
    """Every variable's value (global and local, by name) before and after training."""

    _chief_only = False

    def __init__(self):
        self.before, self.after = {}, {}

    def _fetch(self, out):
        variables = tfv1.global_variables() + tfv1.local_variables()
        out.update(zip([v.op.name for v in variables], self.trainer.sess.run(variables), strict=True))

    def _before_train(self):
        self._fetch(self.before)

    def _after_train(self):
        self._fetch(self.after)
