#!/usr/bin/env python
"""ResNet on ImageNet in the reference's style: fb.resnet.torch augmentation, JPEGs decoded and
augmented in dataflow worker processes, one tower, several towers, or one process per GPU:

    python examples/imagenet/resnet.py --data /data/ILSVRC12 --meta-dir /data/ilsvrc_metadata
    python examples/imagenet/resnet.py --data DIR --lmdb train.lmdb    # training images from an LMDB
    python examples/imagenet/resnet.py --fake --towers 2                # the model alone, random input
    launch --gpus 0,1,2,3 examples/imagenet/resnet.py --data DIR        # Horovod, one process per GPU

``--data`` is an ILSVRC12 directory (``train/<wnid>/*.JPEG``, ``val/``) and ``--meta-dir`` the
caffe meta files (synsets.txt, train.txt, val.txt ...). ``dataflow pack-images DIR train.lmdb``
packs the training split into one LMDB of JPEG bytes, read sequentially (``--lmdb``). Each epoch
reads every training image once across all processes and their workers. The epoch's log line
says whether the input pipeline or the model limits the step rate.

A run resumes from the checkpoint in its log directory (``train_log/<name>``) when there is one;
``--fresh`` starts over. ``--short`` is the quick mode CI runs on a generated tiny dataset.
"""

from __future__ import annotations

import argparse
import os
import sys

from imagenet_utils import (
    ImageNetModel,
    augmentors,
    default_parallel,
    get_fake_dataflow,
    get_imagenet_dataflow,
    get_lmdb_dataflow,
    num_classes_of,
)

from towerpack.trainer import (
    AutoResumeTrainConfig,
    BatchNorm,
    BNReLU,
    ClassificationError,
    Conv2D,
    FullyConnected,
    GlobalAvgPooling,
    InferenceRunner,
    MaxPooling,
    ModelSaver,
    QueueInput,
    ScalarStats,
    ScheduledHyperParamSetter,
    TrainConfig,
    argscope,
    default_trainer,
    logger,
)
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.run_summary import last_accuracy, train_and_summarize
from towerpack.utils.placement import placement

#: depth -> (block kind, blocks per group)
DEPTHS = {
    10: ("basic", [1, 1, 1, 1]),
    18: ("basic", [2, 2, 2, 2]),
    34: ("basic", [3, 4, 6, 3]),
    50: ("bottleneck", [3, 4, 6, 3]),
    101: ("bottleneck", [3, 4, 23, 3]),
}


def bn(x):
    return BatchNorm("bn", x)


def bn_zero_gamma(x):
    """BatchNorm whose scale starts at zero: each residual block starts as the identity."""
    return BatchNorm("bn", x, gamma_initializer=tf.zeros_initializer())


def shortcut(x, ch_out, stride):
    if x.shape[-1] != ch_out:
        return Conv2D("convshortcut", x, ch_out, 1, strides=stride, activation=bn)
    return x


def basic_block(x, ch_out, stride):
    short = x
    x = Conv2D("conv1", x, ch_out, 3, strides=stride, activation=BNReLU)
    x = Conv2D("conv2", x, ch_out, 3, activation=bn_zero_gamma)
    return tf.nn.relu(x + shortcut(short, ch_out, stride))


def bottleneck_block(x, ch_out, stride):
    short = x
    x = Conv2D("conv1", x, ch_out, 1, activation=BNReLU)
    x = Conv2D("conv2", x, ch_out, 3, strides=stride, activation=BNReLU)
    x = Conv2D("conv3", x, ch_out * 4, 1, activation=bn_zero_gamma)
    return tf.nn.relu(x + shortcut(short, ch_out * 4, stride))


class ResNet(ImageNetModel):
    """The reference's ResNet (``resnet_backbone``: conv0, pool0, group0..3, gap, linear)."""

    def __init__(self, depth: int, num_classes: int, image_size: int, width: int = 64, lr: float = 0.1):
        self.block, self.num_blocks = DEPTHS[depth]
        self.num_classes, self.image_shape, self.width, self.base_lr = num_classes, image_size, width, lr

    def get_logits(self, image):
        block = basic_block if self.block == "basic" else bottleneck_block
        with (
            argscope([Conv2D, MaxPooling, GlobalAvgPooling, BatchNorm], data_format="channels_last"),
            argscope(
                Conv2D,
                use_bias=False,
                kernel_initializer=tfv1.variance_scaling_initializer(scale=2.0, mode="fan_out"),
            ),
        ):
            x = Conv2D("conv0", image, self.width, 7, strides=2, activation=BNReLU)
            x = MaxPooling("pool0", x, pool_size=3, strides=2, padding="SAME")
            for g, count in enumerate(self.num_blocks):
                with tfv1.variable_scope(f"group{g}"):
                    for b in range(count):
                        with tfv1.variable_scope(f"block{b}"):
                            x = block(x, self.width * 2**g, 2 if b == 0 and g > 0 else 1)
            x = GlobalAvgPooling("gap", x)
        init = tfv1.random_normal_initializer(stddev=0.01)
        return FullyConnected("linear", x, self.num_classes, kernel_initializer=init)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", help="ILSVRC12 directory (train/, val/)")
    p.add_argument("--meta-dir", help="caffe meta files (default: $TENSORPACK_DATASET/ilsvrc_metadata)")
    p.add_argument("--lmdb", help="read training images from this LMDB (dataflow pack-images)")
    p.add_argument("--fake", action="store_true", help="random input: the model's speed alone")
    p.add_argument("-d", "--depth", type=int, default=18, choices=sorted(DEPTHS))
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--width", type=int, default=64, help="channels of the first group")
    p.add_argument("--batch", type=int, default=256, help="total batch size over all towers/processes")
    p.add_argument("--epochs", type=int, help="default 100 (--short: 6)")
    p.add_argument("--steps-per-epoch", type=int, help="default: one pass over the training images")
    p.add_argument("--workers", type=int, help="dataflow worker processes per rank (default: cores/2)")
    p.add_argument("--towers", type=int, default=1, help="towers in this process (no launcher)")
    p.add_argument("--name", default="imagenet-resnet", help="log directory train_log/<name>")
    p.add_argument("--logroot", default="train_log")
    p.add_argument("--fresh", action="store_true", help="start over, not from the log directory's checkpoint")
    p.add_argument("--short", action="store_true", help="CI: ResNet-10 of width 16 at 64 px, 6 epochs")
    args = p.parse_args(argv)
    if not args.fake and not args.data:
        p.error("give --data DIR (an ILSVRC12 directory) or --fake")
    if args.short:
        args.depth, args.width, args.image_size = 10, 16, 64
        args.epochs, args.batch = args.epochs or 6, min(args.batch, 32)
    args.epochs = args.epochs or 100
    return args


def learning_rate_schedule(epochs: int, lr: float):
    """The reference's steps: /10 after 30, 60 and 90 of 100 epochs, scaled to ``epochs``."""
    points = {1: lr}
    for k, fraction in enumerate((0.3, 0.6, 0.9), 1):
        points[max(2, round(epochs * fraction) + 1)] = lr * 0.1**k
    return sorted(points.items())


def main(argv=None) -> int:
    args = parse_args(argv)
    where = placement()  # launch, horovodrun, mpirun, srun, torchrun, TF_CONFIG, or none
    rank, world = where.rank, where.world_size
    trainer = default_trainer(args.towers)  # under a launcher, ValueError for --towers > 1
    parallel = trainer.replicas
    per_replica = max(1, args.batch // parallel)
    logdir = os.path.join(args.logroot, args.name)
    if rank == 0:
        logger.set_logger_dir(logdir, action="d" if args.fresh else "k")
    workers = args.workers or default_parallel()

    if args.fake:
        num_classes = 1000
        train = get_fake_dataflow(per_replica, args.image_size)
        callbacks = []
    else:
        num_classes = num_classes_of(args.data, args.meta_dir)
        train_augs = augmentors(True, args.image_size)
        if args.lmdb:
            train = get_lmdb_dataflow(args.lmdb, per_replica, train_augs, workers)
        else:
            train = get_imagenet_dataflow(args.data, "train", per_replica, train_augs, workers, args.meta_dir)
        val = get_imagenet_dataflow(
            args.data, "val", min(per_replica, 64), augmentors(False, args.image_size), workers, args.meta_dir
        )
        infs = [ScalarStats("cost"), ClassificationError("wrong-top1", "val-error-top1")]
        callbacks = [InferenceRunner(val, infs)]
    towers_here = args.towers if world == 1 else 1
    steps = args.steps_per_epoch or len(train) // towers_here
    if steps < 1:
        sys.exit(f"error: {len(train)} batch(es) of {per_replica} per epoch: fewer images than --batch needs")
    lr = 0.1 * args.batch / 256  # the reference: 0.1 per 256 images
    # Every rank decides alike: --fresh never resumes (rank 0 is deleting the old checkpoints).
    config_class = TrainConfig if args.fresh else AutoResumeTrainConfig
    config = config_class(
        model=ResNet(args.depth, num_classes, args.image_size, args.width, lr),
        data=QueueInput(train),
        callbacks=[
            ModelSaver(max_to_keep=3),
            *callbacks,
            ScheduledHyperParamSetter("learning_rate", learning_rate_schedule(args.epochs, lr)),
        ],
        steps_per_epoch=steps,
        max_epoch=args.epochs,
        logdir=logdir,
    )
    train_and_summarize(
        config,
        trainer,
        f"ResNet-{args.depth} ({args.image_size} px)",
        lambda stats: last_accuracy(stats, "val-error-top1", "validation top-1 accuracy"),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
