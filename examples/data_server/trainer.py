#!/usr/bin/env python
"""A training process that reads its batches from a ``dataflow serve`` data server (ZMQInput).

    launch --np 2 examples/data_server/trainer.py --addr tcp://127.0.0.1:9100

Start it alone for one process, or under ``launch`` for N Horovod ranks: all of them connect to
the same server, which hands each one distinct batches. Rank 0 validates, saves checkpoints and
writes logs under ``train_log/<name>``. See README.md in this folder.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "digits"))

from train import DigitsConvNet, digits_split  # examples/digits/train.py

from towerpack.dataflow import BatchData, DataFromList, placement
from towerpack.trainer import (
    ClassificationError,
    InferenceRunner,
    ModelSaver,
    ScalarStats,
    TrainConfig,
    ZMQInput,
    default_trainer,
    launch_train_with_config,
    logger,
)

TRAIN_IMAGES = 1500


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--addr", default="tcp://127.0.0.1:9100", help="the data server's address")
    p.add_argument("--batch", type=int, default=32, help="the server's batch size (per process)")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--name", default="data_server")
    p.add_argument("--short", action="store_true", help="a quick run for CI: 3 epochs")
    args = p.parse_args(argv)
    if args.short:
        args.epochs = min(args.epochs, 3)
    where = placement()  # launch, horovodrun, mpirun, srun, torchrun, TF_CONFIG, or none
    rank, world = where.rank, where.world_size
    trainer = default_trainer()
    logdir = os.path.join("train_log", args.name)
    if rank == 0:
        logger.set_logger_dir(logdir, action="d")

    _, val = digits_split()
    steps = TRAIN_IMAGES // (args.batch * world)  # one pass over the data per epoch, all ranks together
    config = TrainConfig(
        model=DigitsConvNet(),
        data=ZMQInput(args.addr, size=steps),
        callbacks=[
            ModelSaver(max_to_keep=2),
            InferenceRunner(
                BatchData(DataFromList(val, shuffle=False), 100, remainder=True),
                [ScalarStats(["cost", "accuracy"]), ClassificationError("incorrect_vector")],
            ),
        ],
        steps_per_epoch=steps,
        max_epoch=args.epochs,
    )
    launch_train_with_config(config, trainer)
    if rank == 0:
        print(f"logs and checkpoint: {logdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
