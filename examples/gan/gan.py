#!/usr/bin/env python
"""A tiny GAN on 2-D points, trained in seconds by the two GAN trainers of ``gan_base.py``:

    python examples/gan/gan.py                      # GANTrainer: one train_op, D then G
    python examples/gan/gan.py --separate --d-period 2   # SeparateGANTrainer: own run_step

The real data are points from a 2-D Gaussian centred at (2, -1); the generator maps noise to
points and has learned when its samples' mean and spread match the data's. Neither trainer is a
SingleCostTrainer: each builds its graph in ``__init__`` and says what one step is, either by
setting ``train_op`` (GANTrainer) or by overriding ``run_step`` (SeparateGANTrainer). The image
GANs of this folder (dcgan.py, wgan_gp.py) use the same trainers.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from gan_base import GANModelDesc, GANTrainer, SeparateGANTrainer

from towerpack.dataflow import BatchData, DataFromGenerator
from towerpack.trainer import Callback, ModelSaver, QueueInput, add_moving_summary, logger
from towerpack.trainer.compat import tf, tfv1

REAL_MEAN = np.array([2.0, -1.0], np.float32)
REAL_STD = 0.5
NOISE_DIM = 4


def real_points(batch_size: int):
    """An endless dataflow of batches of real 2-D points."""

    def gen():
        rng = np.random.RandomState(0)
        while True:
            yield [(REAL_MEAN + REAL_STD * rng.randn(2)).astype(np.float32)]

    return BatchData(DataFromGenerator(gen), batch_size)


def dense(name, x, out, act=None):
    w = tfv1.get_variable(f"{name}/W", [x.shape[-1], out], initializer=tfv1.glorot_uniform_initializer())
    b = tfv1.get_variable(f"{name}/b", [out], initializer=tfv1.zeros_initializer())
    y = tf.matmul(x, w) + b
    return act(y) if act else y


class Gaussian2DGAN(GANModelDesc):
    def inputs(self):
        return [tf.TensorSpec([None, 2], tf.float32, "real")]

    def generator(self, z):
        return dense("out", dense("fc", z, 16, tf.nn.relu), 2)

    def discriminator(self, x):
        return dense("out", dense("fc", x, 32, tf.nn.leaky_relu), 1)

    def build_graph(self, real):
        z = tfv1.random_normal([tf.shape(real)[0], NOISE_DIM], name="z")
        with tfv1.variable_scope("gen"):
            fake = tf.identity(self.generator(z), name="fake")
        with tfv1.variable_scope("discrim"):
            logits_real = self.discriminator(real)
        with tfv1.variable_scope("discrim", reuse=True):
            logits_fake = self.discriminator(fake)
        add_moving_summary(tf.reduce_mean(fake[:, 0], name="fake_mean_x"))
        self.build_losses(logits_real, logits_fake)
        self.collect_variables()

    def optimizer(self):
        return tfv1.train.AdamOptimizer(2e-3, beta1=0.5)


class SampleGenerator(Callback):
    """After training, draw ``n`` points from the generator through a predictor tower."""

    def __init__(self, n: int = 2000):
        self.n = n
        self.samples = None

    def _setup_graph(self):
        # Predictor towers share the training variables and must exist before the session.
        self._predictor = self.trainer.get_predictor(["real"], ["gen/fake"])

    def _after_train(self):
        # Only the batch size of the "real" input matters to the generator.
        (self.samples,) = self._predictor(np.zeros([self.n, 2], np.float32))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--separate", action="store_true", help="use SeparateGANTrainer")
    p.add_argument("--d-period", type=int, default=1)
    p.add_argument("--g-period", type=int, default=1)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--steps", type=int, default=300, help="steps per epoch")
    p.add_argument("--logdir", default=None, help="default: train_log/gan or train_log/gan-separate")
    p.add_argument("--seed", type=int, default=1, help="graph-level random seed (initial weights, noise)")
    p.add_argument("--short", action="store_true", help="a quick run for CI: 4 epochs")
    args = p.parse_args(argv)
    if args.short:
        args.epochs = min(args.epochs, 4)
    logdir = args.logdir or os.path.join("train_log", "gan-separate" if args.separate else "gan")
    logger.set_logger_dir(logdir, action="d")

    tfv1.set_random_seed(args.seed)
    data = QueueInput(real_points(64))
    model = Gaussian2DGAN()
    if args.separate:
        trainer = SeparateGANTrainer(data, model, d_period=args.d_period, g_period=args.g_period)
    else:
        trainer = GANTrainer(data, model)
    sampler = SampleGenerator()
    trainer.train_with_defaults(
        callbacks=[ModelSaver(max_to_keep=1), sampler], steps_per_epoch=args.steps, max_epoch=args.epochs
    )

    fake = sampler.samples
    mean, std = fake.mean(axis=0), fake.std(axis=0)
    print(f"\nreal mean {REAL_MEAN.tolist()} std {REAL_STD}")
    print(f"fake mean [{mean[0]:.3f}, {mean[1]:.3f}] std [{std[0]:.3f}, {std[1]:.3f}]")
    print(f"distance of means: {float(np.linalg.norm(mean - REAL_MEAN)):.4f}")
    print(f"logs and checkpoint: {logdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
