#!/usr/bin/env python
"""DCGAN (Radford et al. 2016) on 32x32 images of coloured shapes drawn on the fly (no download):

    python examples/gan/dcgan.py                    # one process, GANTrainer
    python examples/gan/dcgan.py --towers 2         # 2 towers in this process, data-parallel
    launch --np 2 examples/gan/dcgan.py             # 2 processes, HorovodGANTrainer

The generator maps 64 uniform noise values through a fully connected layer and three transposed
convolutions (BatchNorm + ReLU) to an image; the discriminator is four strided convolutions with
LeakyReLU and BatchNorm. Both are built from towerpack's layers (``FullyConnected``,
``Conv2DTranspose``, ``BNReLU``, ``Conv2D``, ``BatchNorm``, ``LeakyReLU``, ``argscope``,
``LinearWrap``); ``gan_base.py`` holds the trainers. Each step updates the discriminator, then the
generator, on one batch.

Every epoch writes ``samples-<step>.png`` to the log directory ``train_log/<name>``: 64 images
from the same noise vectors, so the grids show the generator improving (TensorBoard shows them
too). A run resumes from the checkpoint in its log directory when there is one; ``--fresh`` starts
over. ``--short`` is the quick mode CI runs.
"""

from __future__ import annotations

import argparse
import os
import sys

from gan_base import GANModelDesc, GANTrainer, HorovodGANTrainer
from sample_grid import SampleGrid
from shapes_data import ShapesData

from towerpack.dataflow import BatchData, placement
from towerpack.trainer import (
    AutoResumeTrainConfig,
    BNReLU,
    Conv2D,
    Conv2DTranspose,
    FullyConnected,
    LeakyReLU,
    LinearWrap,
    ModelSaver,
    QueueInput,
    TrainConfig,
    argscope,
    auto_reuse_variable_scope,
    logger,
)
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.default_trainer import BACKEND_VAR
from towerpack.trainer.run_summary import train_and_summarize


class DCGAN(GANModelDesc):
    """Generator ``gen/...`` and discriminator ``discrim/...`` for ``size`` x ``size`` RGB images
    (``size`` divisible by 8); ``width``: the channels of the discriminator's first layer."""

    def __init__(self, size: int = 32, z_dim: int = 64, width: int = 32):
        if size % 8:
            raise ValueError(f"the image size must be divisible by 8, got {size}")
        self.size, self.z_dim, self.width = size, z_dim, width

    def inputs(self):
        return [tf.TensorSpec([None, self.size, self.size, 3], tf.float32, "image")]

    def generator(self, z):
        """Images in [-1, 1], ``gen`` (the tanh output)."""
        nf, start = self.width, self.size // 8
        x = FullyConnected("fc0", z, nf * 4 * start * start)
        x = BNReLU(tf.reshape(x, [-1, start, start, nf * 4]))
        with argscope(Conv2DTranspose, kernel_size=4, strides=2, activation=BNReLU):
            x = Conv2DTranspose("deconv1", x, nf * 2)
            x = Conv2DTranspose("deconv2", x, nf)
            x = Conv2DTranspose("deconv3", x, 3, activation=None)
        return tf.tanh(x, name="gen")

    @auto_reuse_variable_scope
    def discriminator(self, images):
        """One logit per image."""
        nf = self.width
        with argscope(Conv2D, kernel_size=4, strides=2):
            logits = (
                LinearWrap(images)
                .Conv2D("conv0", nf, activation=LeakyReLU)
                .Conv2D("conv1", nf * 2)
                .BatchNorm("bn1")
                .LeakyReLU()
                .Conv2D("conv2", nf * 4)
                .BatchNorm("bn2")
                .LeakyReLU()
                .FullyConnected("fct", 1)()
            )
        return tf.reshape(logits, [-1])

    def noise(self, batch_size):
        """The generator's input: uniform noise, or the ``z`` fed to a predictor."""
        z = tfv1.random_uniform([batch_size, self.z_dim], -1.0, 1.0, name="z_train")
        return tfv1.placeholder_with_default(z, [None, self.z_dim], name="z")

    def build_graph(self, image):
        real = image / 127.5 - 1.0
        z = self.noise(tf.shape(image)[0])
        with argscope(
            [Conv2D, Conv2DTranspose, FullyConnected],
            kernel_initializer=tfv1.truncated_normal_initializer(stddev=0.02),
        ):
            with tfv1.variable_scope("gen"):
                fake = self.generator(z)
            with tfv1.variable_scope("discrim"):
                logits_real = self.discriminator(real)
                logits_fake = self.discriminator(fake)
        self.build_losses(logits_real, logits_fake)
        self.collect_variables()

    def optimizer(self):
        lr = tfv1.get_variable("learning_rate", initializer=2e-4, trainable=False)
        return tfv1.train.AdamOptimizer(lr, beta1=0.5, epsilon=1e-3)


def arg_parser(name: str, doc: str, steps: int) -> argparse.ArgumentParser:
    """The options of the image GAN scripts (``name``: the default log directory's name)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--steps", type=int, default=steps, help=f"steps per epoch (default {steps})")
    p.add_argument("--batch", type=int, default=64, help="total batch size over all towers/processes")
    p.add_argument("--z-dim", type=int, default=64, help="length of the noise vector")
    p.add_argument("--width", type=int, default=32, help="channels of the discriminator's first layer")
    p.add_argument("--towers", type=int, default=1, help="towers in this process (no launcher)")
    p.add_argument("--name", default=name, help=f"log directory train_log/<name> (default {name})")
    p.add_argument("--logroot", default="train_log")
    p.add_argument("--fresh", action="store_true", help="start over, not from the log directory's checkpoint")
    p.add_argument(
        "--short", action="store_true", help="a quick run for CI: 3 epochs of 12 steps, half width"
    )
    return p


def parse_args(parser: argparse.ArgumentParser, argv=None):
    args = parser.parse_args(argv)
    if args.short:
        args.epochs, args.steps = min(args.epochs, 3), min(args.steps, 12)
        args.width = max(1, args.width // 2)
    for name in ("epochs", "steps", "batch", "z_dim", "width", "towers"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def train(args, model: GANModelDesc, make_trainer, what: str, details=lambda stats: []) -> None:
    """Train ``model`` on shapes with ``make_trainer(input, model, towers, horovod)``, resuming from
    ``train_log/<name>`` unless ``--fresh``, sampling a grid every epoch; then print a summary."""
    where = placement()  # launch, horovodrun, mpirun, srun, torchrun, or none
    horovod = where.world_size > 1
    if horovod and os.environ.get(BACKEND_VAR, "horovod") != "horovod":
        sys.exit(f"{sys.argv[0]}: the GAN trainers work across processes with Horovod only (launch --np N)")
    replicas = where.world_size * args.towers
    per_replica = max(1, args.batch // replicas)
    logdir = os.path.join(args.logroot, args.name)
    if where.rank == 0:
        logger.set_logger_dir(logdir, action="d" if args.fresh else "k")

    data = QueueInput(BatchData(ShapesData(model.size), per_replica))
    trainer = make_trainer(data, model, args.towers, horovod)
    # Every rank decides alike: --fresh never resumes (rank 0 is deleting the old checkpoints).
    config_class = TrainConfig if args.fresh else AutoResumeTrainConfig
    sampler = SampleGrid(model.z_dim)
    config = config_class(
        callbacks=[ModelSaver(max_to_keep=2), sampler],
        steps_per_epoch=args.steps,
        max_epoch=args.epochs,
        logdir=logdir,
    )

    def summary(stats):
        last = stats[-1] if stats else {}
        losses = [f"{key.split('/')[-1]} {last[key]:.4f}" for key in sorted(last) if key.endswith("_loss")]
        lines = [f"last epoch: {', '.join(losses)}"] if losses else []
        if sampler.written:
            lines.append(f"samples: {sampler.written[-1]}")
        return lines + list(details(stats))

    train_and_summarize(config, trainer, what, summary)


def main(argv=None) -> int:
    args = parse_args(arg_parser("dcgan", __doc__, steps=300), argv)

    def make_trainer(data, model, towers, horovod):
        return (HorovodGANTrainer if horovod else GANTrainer)(data, model, towers)

    model = DCGAN(32, args.z_dim, args.width)
    train(args, model, make_trainer, "DCGAN")
    return 0


if __name__ == "__main__":
    sys.exit(main())
