"""A float64 model and rank-sliced data for distributed-trainer tests (equivalence checks).

Rank ``r`` of ``n`` at per-rank batch ``b`` reads rows ``[k*n*b + r*b, k*n*b + (r+1)*b)`` for
step ``k``, so the ranks together see exactly the batches of one process at batch ``n*b``.
"""

from __future__ import annotations

import os

import numpy as np

from towerpack.trainer.base import StopTraining
from towerpack.trainer.callbacks.base import Callback
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.model_desc import ModelDesc

DIM = 4


def regression_data(n: int = 96, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(seed)
    x = rng.normal(size=(n, DIM))
    y = x @ rng.normal(size=DIM) + 0.3 * np.sin(3 * x[:, 0]) + 0.5
    return x, y


class RankSlices:
    """A DataFlow of this rank's part of each global batch (the same batches every epoch)."""

    def __init__(self, x, y, batch: int, rank: int = 0, size: int = 1):
        self.x, self.y, self.batch, self.rank, self.size = x, y, batch, rank, size

    def reset_state(self) -> None:
        pass

    def __len__(self) -> int:
        return len(self.x) // (self.batch * self.size)

    def __iter__(self):
        for k in range(len(self)):
            start = (k * self.size + self.rank) * self.batch
            yield [self.x[start : start + self.batch], self.y[start : start + self.batch]]


class Regression64(ModelDesc):
    """``pred = x @ w + b`` in float64, randomly initialized from ``seed``, Momentum optimizer."""

    def __init__(self, seed: int = 1, lr: float = 0.05):
        self.seed, self.lr = seed, lr

    def inputs(self):
        return [tf.TensorSpec([None, DIM], tf.float64, "x"), tf.TensorSpec([None], tf.float64, "y")]

    def build_graph(self, x, y):
        init = tfv1.random_normal_initializer(seed=self.seed, dtype=tf.float64)
        w = tfv1.get_variable("w", [DIM], tf.float64, initializer=init)
        b = tfv1.get_variable("b", [], tf.float64, initializer=init)
        pred = tf.linalg.matvec(x, w) + b
        return tf.reduce_mean(tf.square(pred - y), name="cost")

    def optimizer(self):
        return tfv1.train.MomentumOptimizer(self.lr, 0.9)


def train_reference(batch: int, epochs: int, seed: int = 1) -> dict[str, np.ndarray]:
    """SimpleTrainer at the total batch, in a fresh graph: the expected final weights."""
    from towerpack.trainer import SimpleTrainer, TrainConfig, launch_train_with_config

    x, y = regression_data()
    out = {}
    with tf.Graph().as_default():
        config = TrainConfig(
            model=Regression64(seed),
            dataflow=RankSlices(x, y, batch),
            callbacks=[FetchVariables(out)],
            monitors=[],
            extra_callbacks=[],
            max_epoch=epochs,
        )
        launch_train_with_config(config, SimpleTrainer())
    return out


class FetchVariables(Callback):
    """After training, store every global variable's value in ``out`` (by name, without ``:0``)."""

    _chief_only = False

    def __init__(self, out: dict):
        self.out = out

    def _after_train(self):
        for v in tfv1.global_variables():
            self.out[v.op.name] = self.trainer.sess.run(v)


class DieAt(Callback):
    """Kill this process abruptly (exit status 3) once the global step reaches ``step``; the
    other processes are then blocked in a collective or a synchronous step."""

    _chief_only = False

    def __init__(self, step: int = 3):
        self.step = step

    def _trigger_step(self):
        if self.global_step >= self.step:
            os._exit(3)


class StopAt(Callback):
    """Raise StopTraining once the global step reaches ``step`` (in this process only)."""

    _chief_only = False

    def __init__(self, step: int = 3):
        self.step = step

    def _trigger_step(self):
        if self.global_step >= self.step:
            raise StopTraining(f"stop at {self.step}")
