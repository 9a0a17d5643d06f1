"""Rank script: Regression64 with AccumGradOptimizer under HorovodTrainer; saves every variable.

Usage: hvd_accum_grad.py OUTDIR NITER LR BATCH
Each rank starts from a different random init (seed 1 + rank): the broadcast must fix that.
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # tests/, for support.*

from support.dist_models import FetchVariables, RankSlices, Regression64, regression_data
from towerpack.trainer import HorovodTrainer, TrainConfig, launch_train_with_config
from towerpack.trainer.optimizer import AccumGradOptimizer


class AccumRegression64(Regression64):
    def __init__(self, seed, lr, niter):
        super().__init__(seed=seed, lr=lr)
        self.niter = niter

    def optimizer(self):
        return AccumGradOptimizer(super().optimizer(), self.niter)


def main():
    out, niter, lr, batch = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    trainer = HorovodTrainer()
    x, y = regression_data()
    values = {}
    config = TrainConfig(
        model=AccumRegression64(1 + trainer.rank, lr, niter),
        dataflow=RankSlices(x, y, batch, trainer.rank, trainer.size),
        callbacks=[FetchVariables(values)],
        monitors=[],
        max_epoch=1,
    )
    launch_train_with_config(config, trainer)
    np.savez(out / f"vars.{trainer.rank}.npz", **{k.replace("/", "__"): v for k, v in values.items()})


if __name__ == "__main__":
    main()
