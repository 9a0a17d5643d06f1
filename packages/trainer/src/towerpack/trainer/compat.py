"""TensorFlow in graph mode: everything in towerpack.trainer builds graphs through ``tfv1``.

Importing this module turns off eager execution, as define-and-run training requires; a
script that imports towerpack.trainer is a graph-mode script. TF 1 graph code also calls
``tf.compat.v1.layers`` and ``tf.compat.v1.nn.rnn_cell``, which TensorFlow 2.21 has only on Keras 2
(tf-keras) with ``TF_USE_LEGACY_KERAS=1``: where tf-keras is installed, this module sets that
variable unless it is set already (TensorFlow reads it when those names are first used), so
``tf.keras`` is Keras 2 too. Keras 3 has no graph mode. The reference instead set ``tf.layers`` to
Keras 3's layers, which do not work in graph mode.
"""

import importlib.util
import os

if importlib.util.find_spec("tf_keras") is not None:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tensorflow as tf

tfv1 = tf.compat.v1

if tf.executing_eagerly():
    tfv1.disable_eager_execution()

__all__ = ["is_tfv2", "tf", "tfv1"]


def is_tfv2() -> bool:
    """Whether TensorFlow 2 behaviour is on (it is unless ``tfv1.disable_v2_behavior()`` was
    called); graph mode, which this module turns on, does not change it."""
    return tf.__internal__.tf2.enabled()
