"""A data-parallel job whose items carry their ids, for the elastic and exact-resume tests.

Usage: ids_train.py LOGDIR [STEP_SECONDS]
N_ITEMS items ``[id, x]`` in a shuffled, sharded dataset; batches of BATCH made in 2 worker
processes; the trainer of the launcher's backend (``default_trainer``);
``AutoResumeTrainConfig(exact_resume=True)``; a checkpoint every epoch (and on pre-emption); EPOCHS
epochs. Every step appends ``<global_step> <id> <id> ...`` (the ids it trained
on) to LOGDIR/ids.<pid>; each rank appends ``start <pid> <rank> <world_size> <epoch> <global_step>``
when training starts and ``epoch <pid> <epoch> <global_step>`` before each epoch to LOGDIR/events.
"""

import os
import sys
import time
from pathlib import Path

import numpy as np

from towerpack.dataflow import BatchData, MultiProcessRunnerZMQ
from towerpack.dataflow.dataset.base import ArrayDataset
from towerpack.trainer import (
    AutoResumeTrainConfig,
    Callback,
    ModelDesc,
    ModelSaver,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.default_trainer import default_trainer

N_ITEMS, BATCH, WORKERS, EPOCHS, DIM = 240, 4, 2, 3, 4
logdir = Path(sys.argv[1])
step_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.1


class Items(ArrayDataset):
    _columns = ("ids", "x")

    def __init__(self):
        self.ids = np.arange(N_ITEMS, dtype=np.int64)
        self.x = np.random.RandomState(0).normal(size=(N_ITEMS, DIM)).astype(np.float32)
        self._init_order(True, training=True, seed=7, remainder="drop")


_running = [0]  # the global step being run: set by Events before each run (a read of the global-step
# variable in the graph may come after the same run's increment)


def _log_ids(ids):
    with open(logdir / f"ids.{os.getpid()}", "a") as f:
        f.write(" ".join(str(int(v)) for v in [_running[0], *ids]) + "\n")
    time.sleep(step_s)
    return ids


class Linear(ModelDesc):
    def inputs(self):
        return [tf.TensorSpec([None], tf.int64, "ids"), tf.TensorSpec([None, DIM], tf.float32, "x")]

    def build_graph(self, ids, x):
        ids = tfv1.py_func(_log_ids, [ids], tf.int64, stateful=True)
        w = tfv1.get_variable("w", [DIM], initializer=tfv1.zeros_initializer())
        with tf.control_dependencies([ids]):
            return tf.reduce_mean(tf.square(tf.reduce_sum(x * w, axis=1) - 1.0), name="cost")

    def optimizer(self):
        return tfv1.train.GradientDescentOptimizer(0.01)


class Events(Callback):
    _chief_only = False

    def _write(self, line):
        with open(logdir / "events", "a") as f:
            f.write(line + "\n")

    def _before_train(self):
        t = self.trainer
        self._write(f"start {os.getpid()} {os.environ.get('RANK', 0)} {os.environ.get('WORLD_SIZE', 1)} "
                    f"{t.starting_epoch} {self.global_step}")  # fmt: skip

    def _before_epoch(self):
        self._write(f"epoch {os.getpid()} {self.epoch_num} {self.global_step}")

    def _before_run(self, ctx):
        _running[0] = self.global_step + 1


trainer = default_trainer()  # on a parameter-server task (tf-server): serves, then exits
config = AutoResumeTrainConfig(
    model=Linear(),
    dataflow=MultiProcessRunnerZMQ(BatchData(Items(), BATCH), WORKERS),
    callbacks=[ModelSaver(), Events()],
    logdir=str(logdir),
    max_epoch=EPOCHS,
    exact_resume=True,
)
launch_train_with_config(config, trainer)
