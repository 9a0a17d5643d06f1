"""A job whose items carry their ids and their data epoch, for the exact-resume tests under ``launch``.

Usage: items_train.py LOGDIR --pipeline runner|lmdb|servers [--workers K] [--lmdb PATH] [--addrs A,B]
[--steps-per-epoch S]

Pipelines (every item a datapoint ``[id, data epoch]``, batches of BATCH):

- ``runner``: an ArrayDataset read by K worker processes (``MultiProcessRunnerZMQ``) that make the
  batches, merged in the order they come;
- ``lmdb``: the reference's LMDB recipe: records read in order (``LMDBSerializer.load(...,
  shuffle=False)``), ``LocallyShuffleData`` (endless, mixing epochs), ``MultiProcessMapDataZMQ`` (K
  processes, results in completion order), ``BatchData``;
- ``servers``: ``ZMQInput`` reading the `dataflow serve` servers at ADDRS (``serve_items.py``).

``AutoResumeTrainConfig(exact_resume=True)``, the trainer of the launcher's backend, a checkpoint
every epoch and on pre-emption. Every step appends ``<global_step> <epoch>:<id> ...`` (what it
trained on) to LOGDIR/steps.<pid>; each rank appends ``start <pid> <rank> <world size> <global step>``
to LOGDIR/events when training starts.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from serve_items import BATCH, N_ITEMS, Items

from towerpack.dataflow import BatchData, LMDBSerializer, LocallyShuffleData, MapData, MultiProcessRunnerZMQ
from towerpack.dataflow.parallel.maps import MultiProcessMapDataZMQ
from towerpack.trainer import AutoResumeTrainConfig, Callback, ModelDesc, ModelSaver, launch_train_with_config
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.default_trainer import default_trainer
from towerpack.trainer.input_source import ZMQInput

EPOCHS = 3


def lmdb_records(path):
    """The reference's LMDB recipe over records ``[id]``, giving ``[id, data epoch]`` batches."""
    reader = LMDBSerializer.load(path, shuffle=False, remainder="uneven")
    df = MapData(reader, lambda dp: [dp[0], np.int64(reader._epoch)])  # the epoch it reads, as it reads
    df = LocallyShuffleData(df, 50)
    df = MultiProcessMapDataZMQ(df, WORKERS, lambda dp: [dp[0] + 0, dp[1]], buffer_size=16)
    return BatchData(df, BATCH)


class IdModel(ModelDesc):
    def inputs(self):
        return [tf.TensorSpec([None], tf.int64, "ids"), tf.TensorSpec([None], tf.int64, "epochs")]

    def build_graph(self, ids, epochs):
        tf.identity(ids, name="trained_ids")
        tf.identity(epochs, name="trained_epochs")
        w = tfv1.get_variable("w", [], initializer=tfv1.zeros_initializer())
        return tf.reduce_mean(tf.square(w * tf.cast(ids, tf.float32) / N_ITEMS - 1.0), name="cost")

    def optimizer(self):
        return tfv1.train.GradientDescentOptimizer(0.01)


class LogSteps(Callback):
    """Appends what every step trained on, and a start event; sleeps a little per step."""

    _chief_only = False

    def _setup_graph(self):
        fetch = [self.graph.get_tensor_by_name(f"trained_{n}:0") for n in ("ids", "epochs")]
        self._args = tfv1.train.SessionRunArgs(fetches=fetch)
        self._path = LOGDIR / f"steps.{os.getpid()}"

    def _before_train(self):
        with open(LOGDIR / "events", "a") as f:
            f.write(f"start {os.getpid()} {os.environ.get('RANK', 0)} {os.environ.get('WORLD_SIZE', 1)} "
                    f"{self.global_step}\n")  # fmt: skip

    def _before_run(self, ctx):
        return self._args

    def _after_run(self, run_context, run_values):
        self._trained = run_values.results

    def _trigger_step(self):
        ids, epochs = self._trained
        pairs = " ".join(f"{e}:{i}" for i, e in zip(ids.tolist(), epochs.tolist(), strict=True))
        with open(self._path, "a") as f:
            f.write(f"{self.global_step} {pairs}\n")
        time.sleep(STEP_S)


p = argparse.ArgumentParser()
p.add_argument("logdir")
p.add_argument("--pipeline", choices=("runner", "lmdb", "servers"), required=True)
p.add_argument("--workers", type=int, default=2)
p.add_argument("--lmdb")
p.add_argument("--addrs")
p.add_argument("--step-s", type=float, default=0.05)
args = p.parse_args()
LOGDIR, WORKERS, STEP_S = Path(args.logdir), args.workers, args.step_s

trainer = default_trainer()
world = int(os.environ.get("WORLD_SIZE", 1))
steps = N_ITEMS // (BATCH * world)
if args.pipeline == "runner":
    data = {"dataflow": MultiProcessRunnerZMQ(BatchData(Items(), BATCH), WORKERS)}
elif args.pipeline == "lmdb":
    data = {"dataflow": lmdb_records(args.lmdb)}
else:
    data = {"data": ZMQInput(args.addrs.split(","), hwm=4, size=steps)}  # a small window: a server that
    # stops is missed at once
config = AutoResumeTrainConfig(
    model=IdModel(),
    callbacks=[ModelSaver(max_to_keep=100), LogSteps()],
    logdir=str(LOGDIR),
    steps_per_epoch=steps,
    max_epoch=EPOCHS,
    exact_resume=True,
    **data,
)
launch_train_with_config(config, trainer)
sys.exit(0)
