#!/usr/bin/env python
"""A small convnet on scikit-learn's 8x8 handwritten digits (no download), three ways:

    python examples/digits/train.py                      # one process, SimpleTrainer + QueueInput
    python examples/digits/train.py --towers 2           # one process, 2 towers (data-parallel)
    launch --np 2 examples/digits/train.py               # 2 processes, HorovodTrainer
    launch --np 2 --backend tf-collective examples/digits/train.py   # 2 processes, no Horovod

Under ``horovodrun``, ``mpirun``, ``srun`` or ``torchrun`` instead of ``launch``, each process finds
its rank the same way (``towerpack.utils.placement()``).

Each process reads its own shard of the training set through a ZMQ dataflow worker
(``MultiProcessRunnerZMQ``), so with N processes each epoch still covers the data once.
Rank 0 validates after every epoch (InferenceRunner: cost, accuracy, error), saves a checkpoint,
and writes TensorBoard events and stats.json under ``train_log/<name>``. At the end it plots
the training curves to ``training_curves.png`` there and prints where everything is.

A run resumes from the checkpoint in its log directory when there is one, as after a pre-emption
(``launch`` passes SIGTERM/SIGUSR1 on; every rank checkpoints and stops); ``--fresh`` starts over
(``make demo`` passes it).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from sklearn.datasets import load_digits

from towerpack.dataflow import (
    BatchData,
    DataFromList,
    LocallyShuffleData,
    MultiProcessRunnerZMQ,
    ShardData,
    placement,
)
from towerpack.trainer import (
    AutoResumeTrainConfig,
    ClassificationError,
    Conv2D,
    FullyConnected,
    InferenceRunner,
    MaxPooling,
    ModelDesc,
    ModelSaver,
    QueueInput,
    ScalarStats,
    ScheduledHyperParamSetter,
    TrainConfig,
    add_moving_summary,
    argscope,
    default_trainer,
    logger,
)
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.plot import plot_stats
from towerpack.trainer.run_summary import last_accuracy, train_and_summarize

NUM_VALIDATION = 297  # of 1797 images: 1500 train, 297 validation


def digits_split(seed: int = 0):
    """``(train, val)`` lists of ``[image float32 [8,8,1] in 0..1, label int32]`` datapoints."""
    data = load_digits()
    images = (data.images / 16.0).astype(np.float32)[..., None]
    labels = data.target.astype(np.int32)
    order = np.random.RandomState(seed).permutation(len(labels))
    points = [[images[i], labels[i]] for i in order]
    return points[NUM_VALIDATION:], points[:NUM_VALIDATION]


def train_dataflow(points, batch_size: int):
    """This rank's shard, shuffled, batched, produced in a separate process over ZMQ."""
    ds = ShardData(DataFromList(points, shuffle=False), drop_remainder=True)  # by placement()
    ds = LocallyShuffleData(ds, buffer_size=len(ds), exact_epochs=True)  # each sample once per epoch
    ds = BatchData(ds, batch_size, remainder=False)
    return MultiProcessRunnerZMQ(ds, num_proc=1)


class DigitsConvNet(ModelDesc):
    """conv 3x3x32 -> conv 3x3x64 -> max-pool -> fc 128 -> fc 10, Adam."""

    def __init__(self, lr: float = 2e-3):
        self.lr = lr

    def inputs(self):
        return [tf.TensorSpec([None, 8, 8, 1], tf.float32, "image"), tf.TensorSpec([None], tf.int32, "label")]

    def build_graph(self, image, label):
        with argscope([Conv2D, FullyConnected], kernel_initializer=tfv1.glorot_uniform_initializer()):
            x = Conv2D("conv1", image, 32, 3, activation=tf.nn.relu)
            x = Conv2D("conv2", x, 64, 3, activation=tf.nn.relu)
            x = MaxPooling("pool", x, 2)  # 4x4x64
            x = FullyConnected("fc1", x, 128, activation=tf.nn.relu)
            logits = FullyConnected("fc2", x, 10)
        tf.nn.softmax(logits, name="prob")

        cost = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=logits), name="cost"
        )
        wrong = tf.cast(tf.not_equal(tf.argmax(logits, 1, output_type=tf.int32), label), tf.float32)
        wrong = tf.identity(wrong, name="incorrect_vector")
        accuracy = tf.subtract(1.0, tf.reduce_mean(wrong), name="accuracy")
        add_moving_summary(cost, accuracy)
        return cost

    def optimizer(self):
        lr = tfv1.get_variable("learning_rate", initializer=self.lr, trainable=False)
        return tfv1.train.AdamOptimizer(lr)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch", type=int, default=64, help="total batch size over all towers/processes")
    p.add_argument("--towers", type=int, default=1, help="towers in this process (no launcher)")
    p.add_argument("--name", default="digits", help="log directory train_log/<name>")
    p.add_argument("--logroot", default="train_log")
    p.add_argument("--fresh", action="store_true", help="start over, not from the log directory's checkpoint")
    p.add_argument("--short", action="store_true", help="a quick run for CI: 3 epochs")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.short:
        args.epochs = min(args.epochs, 3)
    where = placement()  # launch, horovodrun, mpirun, srun, torchrun, TF_CONFIG, or none
    rank, world = where.rank, where.world_size
    trainer = default_trainer(args.towers)  # under a launcher, ValueError for --towers > 1
    parallel = trainer.replicas
    per_step_batch = max(1, args.batch // parallel)  # per process; each tower also takes one such batch
    if per_step_batch * parallel != args.batch:
        logger.warning(
            "--batch %d is not divisible by %d processes/towers: training with a total batch of %d",
            args.batch,
            parallel,
            per_step_batch * parallel,
        )

    logdir = os.path.join(args.logroot, args.name)
    if rank == 0:
        logger.set_logger_dir(logdir, action="d" if args.fresh else "k")

    train, val = digits_split()
    df = train_dataflow(train, per_step_batch)
    towers_here = args.towers if world == 1 else 1
    # Every rank decides alike: --fresh never resumes (rank 0 is deleting the old checkpoints).
    config_class = TrainConfig if args.fresh else AutoResumeTrainConfig
    config = config_class(
        model=DigitsConvNet(),
        data=QueueInput(df),
        callbacks=[
            ModelSaver(max_to_keep=2),
            # A lower learning rate for the last epochs settles the validation accuracy.
            ScheduledHyperParamSetter("learning_rate", [(5, 5e-4), (7, 1e-4)]),
            InferenceRunner(
                BatchData(DataFromList(val, shuffle=False), 100, remainder=True),
                [ScalarStats(["cost", "accuracy"]), ClassificationError("incorrect_vector")],
            ),
        ],
        steps_per_epoch=len(df) // towers_here,
        max_epoch=args.epochs,
        logdir=logdir,
    )

    def details(stats: list[dict]) -> list[str]:
        lines = last_accuracy(stats, "validation_error", "validation accuracy")
        lines.append(f"logs (TensorBoard: tensorboard --logdir {args.logroot}): {logdir}")
        if stats:
            lines.append(f"training curves: {plot_stats(logdir)}")
        return lines

    train_and_summarize(config, trainer, "the digits convnet", details)
    return 0


if __name__ == "__main__":
    sys.exit(main())
