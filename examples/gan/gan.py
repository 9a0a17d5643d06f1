#!/usr/bin/env python
"""A tiny GAN on 2-D points, trained by the two custom GAN trainers written below.

    python examples/gan/gan.py                      # GANTrainer: one train_op, D then G
    python examples/gan/gan.py --separate --d-period 2   # SeparateGANTrainer: own run_step

The real data are points from a 2-D Gaussian centred at (2, -1); the generator maps noise to
points and has learned when its samples' mean and spread match the data's. Neither trainer is a
SingleCostTrainer: each builds its graph in ``__init__`` and says what one step is, either by
setting ``train_op`` (GANTrainer) or by overriding ``run_step`` (SeparateGANTrainer).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from towerpack.dataflow import BatchData, DataFromGenerator
from towerpack.trainer import (
    Callback,
    ModelDesc,
    ModelSaver,
    QueueInput,
    TowerContext,
    TowerFunc,
    TowerTrainer,
    add_moving_summary,
    logger,
)
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


class GANModelDesc(ModelDesc):
    """A model with two losses, ``g_loss`` and ``d_loss``, and the variables of each network."""

    def collect_variables(self, g_scope: str = "gen", d_scope: str = "discrim") -> None:
        self.g_vars = tfv1.get_collection(tfv1.GraphKeys.TRAINABLE_VARIABLES, g_scope)
        self.d_vars = tfv1.get_collection(tfv1.GraphKeys.TRAINABLE_VARIABLES, d_scope)
        if not self.g_vars or not self.d_vars:
            raise ValueError(f"no trainable variables under {g_scope!r} or {d_scope!r}")

    def build_losses(self, logits_real, logits_fake) -> None:
        """The standard (non-saturating) GAN losses, as ``self.d_loss`` and ``self.g_loss``."""
        with tf.name_scope("GAN_loss"):
            xent = tf.nn.sigmoid_cross_entropy_with_logits
            d_real = tf.reduce_mean(xent(logits=logits_real, labels=tf.ones_like(logits_real)))
            d_fake = tf.reduce_mean(xent(logits=logits_fake, labels=tf.zeros_like(logits_fake)))
            self.d_loss = tf.add(d_real, d_fake, name="d_loss")
            self.g_loss = tf.reduce_mean(
                xent(logits=logits_fake, labels=tf.ones_like(logits_fake)), name="g_loss"
            )
            add_moving_summary(self.d_loss, self.g_loss)


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


class GANTrainer(TowerTrainer):
    """One step = one D update, then one G update, in a single ``train_op``."""

    def __init__(self, input, model: GANModelDesc):
        super().__init__()
        signature = model.get_input_signature()
        self.register_callback(input.setup(signature))  # the input's own callbacks (queue feeding)
        self.tower_func = TowerFunc(model.build_graph, signature)
        with TowerContext("", is_training=True):
            self.tower_func(*input.get_input_tensors())
        opt = model.get_optimizer()
        with tf.name_scope("optimize"):
            d_min = opt.minimize(model.d_loss, var_list=model.d_vars, name="d_op")
            with tf.control_dependencies([d_min]):
                self.train_op = opt.minimize(model.g_loss, var_list=model.g_vars, name="g_op")


class SeparateGANTrainer(TowerTrainer):
    """D and G get separate ops; ``run_step`` runs D every ``d_period`` and G every ``g_period`` steps."""

    def __init__(self, input, model: GANModelDesc, d_period: int = 1, g_period: int = 1):
        super().__init__()
        if min(d_period, g_period) < 1:
            raise ValueError("d_period and g_period must be >= 1")
        self._d_period, self._g_period = int(d_period), int(g_period)
        signature = model.get_input_signature()
        self.register_callback(input.setup(signature))
        self.tower_func = TowerFunc(model.build_graph, signature)
        with TowerContext("", is_training=True):
            self.tower_func(*input.get_input_tensors())
        opt = model.get_optimizer()
        with tf.name_scope("optimize"):
            self.d_min = opt.minimize(model.d_loss, var_list=model.d_vars, name="d_min")
            self.g_min = opt.minimize(model.g_loss, var_list=model.g_vars, name="g_min")

    def run_step(self):
        # Periods count training steps, not global steps (each hooked run below is a global step).
        step = (self.epoch_num - 1) * self.steps_per_epoch + self.local_step
        # The hooked session: callbacks (step counter, summaries) see every run.
        if step % self._d_period == 0:
            self.hooked_sess.run(self.d_min)
        if step % self._g_period == 0:
            self.hooked_sess.run(self.g_min)


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
