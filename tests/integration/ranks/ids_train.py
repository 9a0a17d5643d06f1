"""A data-parallel job whose items carry their ids, for the elastic and exact-resume tests.

Usage: ids_train.py LOGDIR [STEP_SECONDS]
N_ITEMS items ``[id, x]`` in a shuffled, sharded dataset; batches of BATCH made in 2 worker
processes; the trainer of the launcher's backend (``default_trainer``);
``AutoResumeTrainConfig(exact_resume=True)``; a checkpoint every epoch (and on pre-emption); EPOCHS
epochs. Every step that succeeds appends ``<global_step> <id> <id> ...`` (the ids it trained on) to
LOGDIR/ids.<pid>; each rank appends ``start <pid> <rank> <world_size> <epoch> <global_step> <attempt>``
when training starts, ``epoch <pid> <epoch> <global_step>`` before each epoch and, after a resize in place,
``resized <pid> <rank> <world_size> <global_step>`` to LOGDIR/events.
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


def _slow(ids):
    time.sleep(step_s)
    return ids


class Linear(ModelDesc):
    def inputs(self):
        return [tf.TensorSpec([None], tf.int64, "ids"), tf.TensorSpec([None, DIM], tf.float32, "x")]

    def build_graph(self, ids, x):
        ids = tf.identity(tfv1.py_func(_slow, [ids], tf.int64, stateful=True), name="trained_ids")
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

    def _setup_graph(self):
        (self._ids,) = [
            op.outputs[0] for op in self.graph.get_operations() if op.name.endswith("trained_ids")
        ]
        self._generation = int(os.environ.get("TOWERPACK_RESIZE_GENERATION", 0))

    def _before_train(self):
        t, env = self.trainer, os.environ
        self._write(f"start {os.getpid()} {env.get('RANK', 0)} {env.get('WORLD_SIZE', 1)} "
                    f"{t.starting_epoch} {self.global_step} {env.get('RESTART_COUNT', 0)}")  # fmt: skip

    def _before_epoch(self):
        self._write(f"epoch {os.getpid()} {self.epoch_num} {self.global_step}")

    def _before_run(self, ctx):
        self._running = self.global_step + 1  # this step's number (the counter moves after the run)
        return tfv1.train.SessionRunArgs(fetches=self._ids)

    def _after_run(self, run_context, run_values):  # only after a step that succeeded
        with open(logdir / f"ids.{os.getpid()}", "a") as f:
            f.write(" ".join(str(int(v)) for v in [self._running, *run_values.results]) + "\n")

    def _trigger_step(self):
        resize = getattr(self.trainer, "resize", None)
        generation = resize.channel.generation if resize is not None else 0
        if generation != self._generation:  # the first step after a regroup (a joiner's first step too)
            rank, size = os.environ.get("RANK"), self.trainer.size
            self._write(f"resized {os.getpid()} {rank} {size} {self.global_step}")
        self._generation = generation


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
