"""Rank script: HorovodTrainer reading one shared `dataflow serve` server through ZMQInput.

Usage: hvd_zmq.py OUTDIR ADDRESS; each rank saves the ids of the datapoints it trained on.
"""

import sys
from pathlib import Path

import numpy as np

from towerpack.trainer import (
    Callback,
    HorovodTrainer,
    ModelDesc,
    TrainConfig,
    ZMQInput,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf, tfv1


class Model(ModelDesc):
    def inputs(self):
        return [tf.TensorSpec([None, 4], tf.float64, "x"), tf.TensorSpec([None], tf.int64, "ids")]

    def build_graph(self, x, ids):
        tf.identity(ids, name="used_ids")
        w = tfv1.get_variable("w", [4], tf.float64, initializer=tfv1.zeros_initializer())
        return tf.reduce_mean(tf.square(tf.linalg.matvec(x, w) - 1.0), name="cost")

    def optimizer(self):
        return tfv1.train.GradientDescentOptimizer(0.1)


class RecordIds(Callback):
    _chief_only = False

    def _setup_graph(self):
        self.ids = []

    def _before_run(self, ctx):
        return tfv1.train.SessionRunArgs("used_ids:0")

    def _after_run(self, run_context, run_values):
        self.ids.extend(run_values.results.tolist())


def main():
    out, address = Path(sys.argv[1]), sys.argv[2]
    trainer = HorovodTrainer()
    record = RecordIds()
    config = TrainConfig(
        model=Model(), data=ZMQInput(address, hwm=4), callbacks=[record], steps_per_epoch=10, max_epoch=1
    )
    launch_train_with_config(config, trainer)
    np.save(out / f"ids.{trainer.rank}.npy", np.array(record.ids))


if __name__ == "__main__":
    main()
