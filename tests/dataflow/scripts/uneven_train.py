"""Rank script: train on this rank's shard of an LMDB dataset whose size the rank count does not divide.

Usage: uneven_train.py OUTDIR DATASET horovod|tf-server [--workers N]
Each worker rank saves the ids it trained on, one row per step, to OUTDIR/ids.<rank>.npy.
"""

import argparse
from pathlib import Path

import numpy as np

from towerpack.dataflow import BatchData, LMDBSerializer, MultiProcessRunnerZMQ

BATCH = 2
EPOCHS = 2


def model_and_recorder():
    from towerpack.trainer import Callback, ModelDesc
    from towerpack.trainer.compat import tf, tfv1

    class Model(ModelDesc):
        def inputs(self):
            return [tf.TensorSpec([None], tf.int64, "ids"), tf.TensorSpec([None, 4], tf.float32, "x")]

        def build_graph(self, ids, x):
            tf.identity(ids, name="used_ids")
            w = tfv1.get_variable("w", [4], tf.float32, initializer=tfv1.zeros_initializer())
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
            self.ids.append(run_values.results.tolist())

    return Model(), RecordIds()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("dataset")
    p.add_argument("backend", choices=["horovod", "tf-server"])
    p.add_argument("--workers", type=int, default=0)
    a = p.parse_args()
    from towerpack.trainer import TrainConfig, launch_train_with_config

    if a.backend == "horovod":
        from towerpack.trainer import HorovodTrainer

        trainer = HorovodTrainer()
        rank = trainer.rank
    else:
        from towerpack.trainer import DistributedTrainerReplicated

        trainer = DistributedTrainerReplicated(1, worker_timeout=60)  # a parameter server exits here
        rank = trainer.task.index
    # Every rank reads its equal share of each epoch (the rank from placement()).
    df = LMDBSerializer.load(a.dataset, shuffle=True, block_size=8, shuffle_buffer=16)
    if a.workers:
        df = MultiProcessRunnerZMQ(df, a.workers, hwm=8)
    model, record = model_and_recorder()
    config = TrainConfig(model=model, dataflow=BatchData(df, BATCH), callbacks=[record], max_epoch=EPOCHS)
    launch_train_with_config(config, trainer)
    np.save(Path(a.out) / f"ids.{rank}.npy", np.array(record.ids))


if __name__ == "__main__":
    main()
