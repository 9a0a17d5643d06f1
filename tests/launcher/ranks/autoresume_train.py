"""Restart + resume with the real trainer: AutoResumeTrainConfig, ModelSaver every epoch, 4 epochs.

On the first attempt (RESTART_COUNT=0) the process dies as epoch 3 begins, after epoch 2's checkpoint
and stats; the restarted attempt must continue at epoch 3 from global step 8. Each finished epoch
appends 'attempt <k> epoch <e> step <global_step>' to LOGDIR/epochs.txt.
"""

import os
import sys

import numpy as np

from towerpack.trainer import (
    AutoResumeTrainConfig,
    Callback,
    ModelDesc,
    ModelSaver,
    SimpleTrainer,
    launch_train_with_config,
    logger,
)
from towerpack.trainer.compat import tf, tfv1

logdir = sys.argv[1]
attempt = int(os.environ["RESTART_COUNT"])


class Linear(ModelDesc):
    def inputs(self):
        return [tf.TensorSpec([None, 2], tf.float32, "x"), tf.TensorSpec([None], tf.float32, "y")]

    def build_graph(self, x, y):
        w = tfv1.get_variable("w", [2], initializer=tfv1.zeros_initializer())
        return tf.reduce_mean(tf.square(tf.reduce_sum(x * w, axis=1) - y), name="cost")

    def optimizer(self):
        return tfv1.train.GradientDescentOptimizer(0.1)


class Batches:
    def __init__(self):
        rng = np.random.RandomState(0)
        self.x = rng.normal(size=(32, 2)).astype(np.float32)
        self.y = (self.x @ np.array([1.0, -2.0], np.float32)).astype(np.float32)

    def reset_state(self):
        pass

    def __len__(self):
        return 4

    def __iter__(self):
        for i in range(4):
            yield [self.x[i * 8 : (i + 1) * 8], self.y[i * 8 : (i + 1) * 8]]


class Record(Callback):
    """Records each finished epoch; on the first attempt, dies as epoch 3 starts."""

    def _before_epoch(self):
        if attempt == 0 and self.epoch_num == 3:
            print("dying at the start of epoch 3", file=sys.stderr, flush=True)
            os._exit(3)

    def _trigger_epoch(self):
        with open(os.path.join(logdir, "epochs.txt"), "a") as f:
            f.write(f"attempt {attempt} epoch {self.epoch_num} step {self.global_step}\n")


logger.set_logger_dir(logdir, action="k")
config = AutoResumeTrainConfig(
    dataflow=Batches(),
    model=Linear(),
    callbacks=[ModelSaver(), Record()],
    steps_per_epoch=4,
    max_epoch=4,
)
launch_train_with_config(config, SimpleTrainer())
