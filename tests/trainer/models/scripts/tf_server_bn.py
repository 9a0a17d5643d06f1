"""Worker/ps script: train SyncBNNet (BatchNorm without synchronization) with a TF-server trainer
and save every variable of this worker. Usage: tf_server_bn.py OUTDIR replicated|ps"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # tests/, for support.*

from support.dist_models import FetchVariables, RankSlices
from support.syncbn_model import SyncBNNet, syncbn_data
from towerpack.trainer import (
    DistributedTrainerParameterServer,
    DistributedTrainerReplicated,
    TrainConfig,
    launch_train_with_config,
)


def main():
    out, mode = Path(sys.argv[1]), sys.argv[2]
    kind = DistributedTrainerReplicated if mode == "replicated" else DistributedTrainerParameterServer
    trainer = kind(1)  # a parameter-server task serves inside the constructor and exits
    x, y = syncbn_data()
    values = {}
    config = TrainConfig(
        model=SyncBNNet(None),
        dataflow=RankSlices(x, y, 4, trainer.task.index, trainer.task.num_workers),
        callbacks=[FetchVariables(values)],
        monitors=[],
        max_epoch=2,
    )
    launch_train_with_config(config, trainer)
    np.savez(out / f"vars.{trainer.task.index}.npz", **{k.replace("/", "__"): v for k, v in values.items()})


if __name__ == "__main__":
    main()
