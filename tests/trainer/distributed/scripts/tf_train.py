"""Worker/ps script: train Regression64 with a TF-server trainer and save every variable per worker.

Usage: tf_train.py OUTDIR --mode replicated|ps [--epochs N] [--batch B] [--logdir DIR]
    [--die-rank R | --hang-rank R | --stop-rank R --stop-step S] [--worker-timeout S]
Parameter-server tasks serve from the trainer's constructor and exit when the workers are done.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # tests/, for support.*

from support.dist_models import DieAt, FetchVariables, RankSlices, Regression64, StopAt, regression_data
from towerpack.trainer import (
    AutoResumeTrainConfig,
    Callback,
    DistributedTrainerParameterServer,
    DistributedTrainerReplicated,
    ModelSaver,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf, tfv1


class HangAt(Callback):
    """After the first step, write ``ready.<rank>`` (holding the pid) and wait to be killed."""

    _chief_only = False

    def __init__(self, out, rank):
        self.path = Path(out) / f"ready.{rank}"

    def _trigger_step(self):
        if self.global_step >= 1:
            self.path.write_text(str(os.getpid()))
            time.sleep(600)


class StepsSeen(Callback):
    """A non-trainable variable made by a callback, starting at 1000 x rank, +1 per step."""

    _chief_only = False

    def __init__(self, rank):
        self.rank = rank

    def _setup_graph(self):
        var = tfv1.get_variable(
            "steps_seen", initializer=tf.constant(1000.0 * self.rank, tf.float64), trainable=False
        )
        self._args = tfv1.train.SessionRunArgs(fetches=var.assign_add(1.0).op)

    def before_run(self, ctx):
        return self._args


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--mode", choices=["replicated", "ps"], default="replicated")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--die-rank", type=int, default=-1)
    p.add_argument("--hang-rank", type=int, default=-1)
    p.add_argument("--stop-rank", type=int, default=-1)
    p.add_argument("--stop-step", type=int, default=3)
    p.add_argument("--worker-timeout", type=float, default=120.0)
    p.add_argument("--logdir")
    a = p.parse_args()
    cls = DistributedTrainerReplicated if a.mode == "replicated" else DistributedTrainerParameterServer
    trainer = cls(1, worker_timeout=a.worker_timeout)  # exits here in a parameter-server task
    rank, size = trainer.task.index, trainer.task.num_workers
    x, y = regression_data()
    values = {}
    callbacks = [StepsSeen(rank), FetchVariables(values)]
    if rank == a.die_rank:
        callbacks.append(DieAt())
    if rank == a.stop_rank:
        callbacks.append(StopAt(a.stop_step))
    if rank == a.hang_rank:
        callbacks.append(HangAt(a.out, rank))
    if a.logdir:
        callbacks.append(ModelSaver(checkpoint_dir=a.logdir))
    config = AutoResumeTrainConfig(
        model=Regression64(seed=1 + rank),
        dataflow=RankSlices(x, y, a.batch, rank, size),
        callbacks=callbacks,
        logdir=a.logdir,
        max_epoch=a.epochs,
    )
    launch_train_with_config(config, trainer)
    np.savez(Path(a.out) / f"vars.{rank}.npz", **{k.replace("/", "__"): v for k, v in values.items()})


if __name__ == "__main__":
    main()
