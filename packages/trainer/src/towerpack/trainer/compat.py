"""TensorFlow in graph mode: everything in towerpack.trainer builds graphs through ``tfv1``.

Importing this module turns off eager execution, as define-and-run training requires; a
script that imports towerpack.trainer is a graph-mode script.
"""

import tensorflow as tf

tfv1 = tf.compat.v1

if tf.executing_eagerly():
    tfv1.disable_eager_execution()

__all__ = ["tf", "tfv1"]
