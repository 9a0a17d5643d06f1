#!/usr/bin/env python
"""Parameter-server training on a ``tf.train.Server`` cluster, started by the launcher:

    launch --backend tf-server --np 2 --ps 1 examples/parameter_server/train.py

The launcher starts 2 worker tasks and 1 parameter-server task, all running this script, and
gives each its role in ``TF_CONFIG``. Constructing ``DistributedTrainerParameterServer`` in the
ps task serves the variables until the workers are done, then this script returns. Each worker
trains on its shard of the digits data; gradients are averaged synchronously and the variables
live on the parameter server. Worker 0 (the chief) validates, saves and logs to train_log/<name>.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "digits"))

from train import DigitsConvNet, digits_split  # examples/digits/train.py

from towerpack.dataflow import BatchData, DataFromList, ShardData
from towerpack.trainer import (
    ClassificationError,
    DistributedTrainerParameterServer,
    InferenceRunner,
    ModelSaver,
    QueueInput,
    ScalarStats,
    TrainConfig,
    launch_train_with_config,
    logger,
)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=32, help="per worker")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--name", default="parameter_server")
    p.add_argument("--short", action="store_true", help="a quick run for CI: 2 epochs")
    args = p.parse_args(argv)
    if args.short:
        args.epochs = min(args.epochs, 2)

    trainer = DistributedTrainerParameterServer(1)  # one tower per worker
    if trainer.task.job == "ps":
        return 0  # the constructor served until training ended
    rank, workers = trainer.task.index, trainer.task.num_workers
    logdir = os.path.join("train_log", args.name)
    if trainer.is_chief:
        logger.set_logger_dir(logdir, action="d")

    train, val = digits_split()
    # Shard first (same order everywhere), then each worker shuffles its own part every epoch.
    shard = list(ShardData(DataFromList(train, shuffle=False), rank, workers, drop_remainder=True))
    df = BatchData(DataFromList(shard, shuffle=True), args.batch)
    config = TrainConfig(
        model=DigitsConvNet(),
        data=QueueInput(df),
        callbacks=[
            ModelSaver(max_to_keep=2),
            InferenceRunner(
                BatchData(DataFromList(val, shuffle=False), 100, remainder=True),
                [ScalarStats(["cost", "accuracy"]), ClassificationError("incorrect_vector")],
            ),
        ],
        steps_per_epoch=len(df),
        max_epoch=args.epochs,
    )
    launch_train_with_config(config, trainer)
    if trainer.is_chief:
        print(f"logs and checkpoint: {logdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
