#!/usr/bin/env python
"""The reference's CIFAR ResNet (pre-activation, He et al. 2016) built from towerpack's layers,
with synchronized BatchNorm, on CIFAR-shaped data that needs no download:

    python examples/resnet/cifar_resnet.py                  # one process, SimpleTrainer
    python examples/resnet/cifar_resnet.py --towers 2       # 2 towers, BatchNorm synchronized over them
    launch --np 2 examples/resnet/cifar_resnet.py           # 2 processes (Horovod), synchronized over ranks

The data are scikit-learn's 8x8 handwritten digits scaled up to 32x32 RGB images (1500 for
training, 297 for validation), shifted randomly by up to 4 pixels while training, as CIFAR
images usually are. With several towers or processes every BatchNorm layer normalizes by the
statistics of the whole batch (``sync_statistics='nccl'`` across towers, ``'horovod'`` across
processes), so the model trains as it would on one device at the total batch size.

The model code is the reference's, written with ``Conv2D``, ``BNReLU``, ``AvgPooling``,
``GlobalAvgPooling``, ``FullyConnected``, ``argscope`` and ``regularize_cost``; its checkpoints
carry the reference's variable names. ``--short`` is the quick mode CI runs.

A run resumes from the checkpoint in its log directory (``train_log/<name>``) when there is one, as
after a pre-emption (``launch`` passes SIGTERM/SIGUSR1 on; every rank checkpoints and stops);
``--fresh`` starts over.
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
    MapDataComponent,
    MultiProcessRunnerZMQ,
    ShardData,
    placement,
)
from towerpack.trainer import (
    AutoResumeTrainConfig,
    AvgPooling,
    BatchNorm,
    BNReLU,
    ClassificationError,
    Conv2D,
    FullyConnected,
    GlobalAvgPooling,
    InferenceRunner,
    ModelDesc,
    ModelSaver,
    QueueInput,
    ScalarStats,
    ScheduledHyperParamSetter,
    TrainConfig,
    add_moving_summary,
    argscope,
    default_trainer,
    get_global_step_var,
    logger,
    regularize_cost,
)
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.run_summary import last_accuracy, train_and_summarize

NUM_VALIDATION = 297


def digits_as_cifar(seed: int = 0):
    """``(train, val)`` lists of ``[uint8 image [32, 32, 3], int32 label]``."""
    data = load_digits()
    images = np.kron(data.images / 16.0, np.ones((4, 4)))  # 8x8 -> 32x32
    tint = np.array([1.0, 0.8, 0.6])  # three channels, not all alike
    images = (images[..., None] * tint * 255).astype(np.uint8)
    order = np.random.RandomState(seed).permutation(len(images))
    points = [[images[i], np.int32(data.target[i])] for i in order]
    return points[NUM_VALIDATION:], points[:NUM_VALIDATION]


def random_shift(image, rng=np.random):
    """Pad by 4 pixels and crop 32x32 at a random place."""
    padded = np.pad(image, [(4, 4), (4, 4), (0, 0)])
    y, x = rng.randint(0, 9, size=2)
    return padded[y : y + 32, x : x + 32]


def train_dataflow(points, batch_size: int):
    """This rank's shard, shifted and batched in a separate process."""
    ds = ShardData(DataFromList(points, shuffle=True), drop_remainder=True)  # by placement()
    ds = MapDataComponent(ds, random_shift, 0)
    ds = BatchData(ds, batch_size, remainder=False)
    return MultiProcessRunnerZMQ(ds, num_proc=1)


class CifarResNet(ModelDesc):
    """Pre-activation ResNet with 6n+2 layers: 3 stages of n residual blocks (16, 32, 64 channels)."""

    def __init__(self, n: int, sync_bn: str | None = None, lr: float = 0.1, data_format: str | None = None):
        self.n, self.sync_bn, self.lr = n, sync_bn, lr
        # channels_first is faster on GPUs; towerpack's layers run either layout on any device.
        self.data_format = data_format or (
            "channels_first" if tf.config.list_physical_devices("GPU") else "channels_last"
        )

    def inputs(self):
        return [
            tf.TensorSpec([None, 32, 32, 3], tf.float32, "input"),
            tf.TensorSpec([None], tf.int32, "label"),
        ]

    def build_graph(self, image, label):
        image = image / 128.0 - 1
        data_format = self.data_format
        channel_axis = 1 if data_format == "channels_first" else 3
        if data_format == "channels_first":
            image = tf.transpose(image, [0, 3, 1, 2])

        def residual(name, net, increase_dim=False, first=False):
            in_channel = net.shape[channel_axis]
            out_channel, stride = (in_channel * 2, 2) if increase_dim else (in_channel, 1)
            with tfv1.variable_scope(name):
                b1 = net if first else BNReLU(net)
                c1 = Conv2D("conv1", b1, out_channel, strides=stride, activation=BNReLU)
                c2 = Conv2D("conv2", c1, out_channel)
                if increase_dim:
                    net = AvgPooling("pool", net, 2)
                    pad = [[0, 0]] * 4
                    pad[channel_axis] = [in_channel // 2, in_channel // 2]
                    net = tf.pad(net, pad)
                return c2 + net

        with (
            argscope([Conv2D, AvgPooling, BatchNorm, GlobalAvgPooling], data_format=data_format),
            argscope(
                Conv2D,
                use_bias=False,
                kernel_size=3,
                kernel_initializer=tfv1.variance_scaling_initializer(scale=2.0, mode="fan_out"),
            ),
            argscope(BatchNorm, sync_statistics=self.sync_bn),
        ):
            net = Conv2D("conv0", image, 16, activation=BNReLU)
            for stage in (1, 2, 3):
                net = residual(f"res{stage}.0", net, increase_dim=stage > 1, first=stage == 1)
                for k in range(1, self.n):
                    net = residual(f"res{stage}.{k}", net)
            net = BNReLU("bnlast", net)
            net = GlobalAvgPooling("gap", net)
        logits = FullyConnected("linear", net, 10)
        tf.nn.softmax(logits, name="output")

        cost = tf.nn.sparse_softmax_cross_entropy_with_logits(logits=logits, labels=label)
        cost = tf.reduce_mean(cost, name="cross_entropy_loss")
        wrong = tf.cast(tf.logical_not(tfv1.nn.in_top_k(logits, label, 1)), tf.float32, name="wrong_vector")
        add_moving_summary(tf.reduce_mean(wrong, name="train_error"))
        wd_w = tfv1.train.exponential_decay(0.0002, get_global_step_var(), 480000, 0.2, True)
        wd_cost = tf.multiply(wd_w, regularize_cost(".*/W", tf.nn.l2_loss), name="wd_cost")
        add_moving_summary(cost, wd_cost)
        return tf.add_n([cost, wd_cost], name="cost")

    def optimizer(self):
        lr = tfv1.get_variable("learning_rate", initializer=self.lr, trainable=False)
        tfv1.summary.scalar("lr", lr)
        return tfv1.train.MomentumOptimizer(lr, 0.9)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=3, help="residual blocks per stage (6n+2 layers; 3 = ResNet-20)")
    p.add_argument("--epochs", type=int, default=12)
    p.add_argument("--batch", type=int, default=64, help="total batch size over all towers/processes")
    p.add_argument("--towers", type=int, default=1, help="towers in this process (no launcher)")
    p.add_argument("--no-sync-bn", action="store_true", help="each replica normalizes by its own batch")
    p.add_argument(
        "--data-format",
        choices=["channels_first", "channels_last"],
        help="the layers' layout (default: channels_first with a GPU, channels_last without)",
    )
    p.add_argument("--name", default="resnet", help="log directory train_log/<name>")
    p.add_argument("--logroot", default="train_log")
    p.add_argument("--fresh", action="store_true", help="start over, not from the log directory's checkpoint")
    p.add_argument("--short", action="store_true", help="a quick run for CI: ResNet-8, 5 epochs")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.short:
        args.n, args.epochs = 1, min(args.epochs, 5)
    where = placement()  # launch, horovodrun, mpirun, srun, torchrun, TF_CONFIG, or none
    rank, world = where.rank, where.world_size
    trainer = default_trainer(args.towers)  # under a launcher, ValueError for --towers > 1
    parallel = trainer.replicas
    # BatchNorm statistics across the processes (Horovod or collective), or across the towers.
    sync = "horovod" if world > 1 else "nccl" if args.towers > 1 else None
    if args.no_sync_bn:
        sync = None
    per_replica = max(1, args.batch // parallel)
    logdir = os.path.join(args.logroot, args.name)
    if rank == 0:
        logger.set_logger_dir(logdir, action="d" if args.fresh else "k")

    train, val = digits_as_cifar()
    df = train_dataflow(train, per_replica)
    towers_here = args.towers if world == 1 else 1
    # Every rank decides alike: --fresh never resumes (rank 0 is deleting the old checkpoints).
    config_class = TrainConfig if args.fresh else AutoResumeTrainConfig
    config = config_class(
        model=CifarResNet(args.n, sync, data_format=args.data_format),
        data=QueueInput(df),
        callbacks=[
            ModelSaver(max_to_keep=2),
            InferenceRunner(
                BatchData(DataFromList(val, shuffle=False), 100, remainder=True),
                [ScalarStats("cost"), ClassificationError("wrong_vector")],
            ),
            ScheduledHyperParamSetter("learning_rate", [(1, 0.1), (args.epochs * 2 // 3 + 1, 0.01)]),
        ],
        steps_per_epoch=len(df) // towers_here,
        max_epoch=args.epochs,
        logdir=logdir,
    )

    def details(stats: list[dict]) -> list[str]:
        lines = [f"synchronized BatchNorm: {sync or 'no'}"]
        return lines + last_accuracy(stats, "validation_error", "validation accuracy")

    train_and_summarize(config, trainer, f"ResNet-{6 * args.n + 2}", details)
    return 0


if __name__ == "__main__":
    sys.exit(main())
