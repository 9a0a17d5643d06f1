"""A small float64 convnet with BatchNorm layers for synchronized-statistics tests.

``SyncBNNet(sync)`` uses ``BatchNorm(sync_statistics=sync)`` twice (directly, and through BNReLU
as a convolution's activation); its initializers are seeded, so every run starts equal.
"""

from __future__ import annotations

import numpy as np

from towerpack.trainer import BatchNorm, BNReLU, Conv2D, FullyConnected, GlobalAvgPooling, ModelDesc, argscope
from towerpack.trainer.compat import tf, tfv1

SHAPE = (4, 4, 2)


def syncbn_data(n: int = 48, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(seed)
    x = rng.normal(size=(n, *SHAPE)) * [1.0, 2.0] + [0.5, -1.0]
    y = x.mean(axis=(1, 2, 3)) + np.sin(x[:, 0, 0, 0])
    return x, y


class SyncBNNet(ModelDesc):
    def __init__(self, sync, lr: float = 0.1):
        self.sync, self.lr = sync, lr

    def inputs(self):
        return [tf.TensorSpec([None, *SHAPE], tf.float64, "x"), tf.TensorSpec([None], tf.float64, "y")]

    def build_graph(self, x, y):
        init = tfv1.random_normal_initializer(stddev=0.5, seed=1, dtype=tf.float64)
        with (
            argscope([Conv2D, FullyConnected], kernel_initializer=init),
            argscope(Conv2D, use_bias=False, kernel_size=3),
            argscope(BatchNorm, sync_statistics=self.sync, momentum=0.8),
        ):
            net = tf.nn.relu(BatchNorm("bn0", Conv2D("conv0", x, 3)))
            net = Conv2D("conv1", net, 3, activation=BNReLU)
            pred = tf.squeeze(FullyConnected("fc", GlobalAvgPooling("gap", net), 1), 1)
        return tf.reduce_mean(tf.square(pred - y), name="cost")

    def optimizer(self):
        return tfv1.train.MomentumOptimizer(self.lr, 0.9)
