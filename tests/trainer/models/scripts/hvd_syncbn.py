"""Rank script: train SyncBNNet with BatchNorm(sync_statistics='horovod') under HorovodTrainer and
save every variable of this rank. Usage: hvd_syncbn.py OUTDIR BATCH"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # tests/, for support.*

from support.dist_models import FetchVariables, RankSlices
from support.syncbn_model import SyncBNNet, syncbn_data
from towerpack.trainer import HorovodTrainer, TrainConfig, launch_train_with_config


def main():
    out, batch = Path(sys.argv[1]), int(sys.argv[2])
    trainer = HorovodTrainer()
    x, y = syncbn_data()
    values = {}
    config = TrainConfig(
        model=SyncBNNet("horovod"),
        dataflow=RankSlices(x, y, batch, trainer.rank, trainer.size),
        callbacks=[FetchVariables(values)],
        monitors=[],
        max_epoch=2,
    )
    launch_train_with_config(config, trainer)
    np.savez(out / f"vars.{trainer.rank}.npz", **{k.replace("/", "__"): v for k, v in values.items()})


if __name__ == "__main__":
    main()
