"""Rank script: train Regression64 with HorovodTrainer and save every variable per rank.

Usage: hvd_train.py OUTDIR [--epochs N] [--batch B] [--logdir DIR] [--die-rank R]
Each rank starts from a different random init (seed 1 + rank): the broadcast must fix that.
"""

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # tests/, for support.*

from support.dist_models import DieAt, FetchVariables, RankSlices, Regression64, StopAt, regression_data
from towerpack.trainer import (
    AutoResumeTrainConfig,
    Callback,
    DistributedInferenceRunner,
    HorovodTrainer,
    ModelSaver,
    ScalarStats,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf, tfv1


class RankVariable(Callback):
    """A callback-made variable whose initial value differs per rank; writes a chief-only marker."""

    _chief_only = False

    def _setup_graph(self):
        rank = float(os.environ.get("RANK", 0))
        tfv1.get_variable("callback_var", initializer=tf.constant(rank, tf.float64), trainable=False)


class ChiefMarker(Callback):
    def __init__(self, path):
        self.path = path

    def _before_train(self):
        Path(self.path).write_text(os.environ.get("RANK", "0"))


class ValidationShard:
    """Of ``batches`` validation batches, those ``k`` with ``k % size == size - 1 - rank``: the last
    rank gets the first; 5 are uneven across 2 or 3 ranks, and with 2 of them the chief gets none."""

    def __init__(self, rank, size, batches=5, batch=8):
        x, y = regression_data(40, seed=5)
        parts = [[x[k : k + batch], y[k : k + batch]] for k in range(0, batches * batch, batch)]
        self.parts = parts[size - 1 - rank :: size]

    def reset_state(self):
        pass

    def __len__(self):
        return len(self.parts)

    def __iter__(self):
        return iter(self.parts)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--logdir")
    p.add_argument("--die-rank", type=int, default=-1)
    p.add_argument("--stop-rank", type=int, default=-1)
    p.add_argument("--val-batches", type=int, default=5)
    a = p.parse_args()
    out = Path(a.out)
    trainer = HorovodTrainer(broadcast_every_epoch=True)
    x, y = regression_data()
    values = {}
    callbacks = [RankVariable(), ChiefMarker(out / f"chief.{trainer.rank}"), FetchVariables(values)]
    if a.logdir:
        callbacks.append(ModelSaver(checkpoint_dir=a.logdir))
    evaluator = DistributedInferenceRunner(
        ValidationShard(trainer.rank, trainer.size, a.val_batches), ScalarStats("cost")
    )
    callbacks.append(evaluator)
    if trainer.rank == a.die_rank:
        callbacks.append(DieAt(3))
    if trainer.rank == a.stop_rank:
        callbacks.append(StopAt(3))
    config = AutoResumeTrainConfig(
        model=Regression64(seed=1 + trainer.rank),
        dataflow=RankSlices(x, y, a.batch, trainer.rank, trainer.size),
        callbacks=callbacks,
        logdir=a.logdir,
        max_epoch=a.epochs,
    )
    launch_train_with_config(config, trainer)
    (out / f"eval.{trainer.rank}.json").write_text(json.dumps(evaluator.last_results))
    np.savez(out / f"vars.{trainer.rank}.npz", **{k.replace("/", "__"): v for k, v in values.items()})


if __name__ == "__main__":
    main()
