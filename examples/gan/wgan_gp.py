#!/usr/bin/env python
"""WGAN-GP, the improved Wasserstein GAN (Gulrajani et al. 2017), on the shapes of dcgan.py:

    python examples/gan/wgan_gp.py                   # one process, SeparateGANTrainer
    python examples/gan/wgan_gp.py --towers 2        # 2 towers in this process, data-parallel
    launch --np 2 examples/gan/wgan_gp.py            # 2 processes, HorovodSeparateGANTrainer

The generator is DCGAN's. The critic is DCGAN's discriminator with LayerNorm in place of
BatchNorm (the penalty needs every image scored on its own) and scores instead of logits. The
critic minimizes ``mean(score(fake)) - mean(score(real)) + 10 * gradient_penalty``, the penalty
``mean((|grad score(x)| - 1)^2)`` taken at random interpolates ``x`` of real and fake images; the
generator minimizes ``-mean(score(fake))``. As in the paper, the critic takes 5 steps per
generator step (``--critic-steps``), each with Adam (lr 1e-4, beta1 0, beta2 0.9) on a new batch.

``wasserstein_distance`` (the critic's estimate, ``mean(score(real)) - mean(score(fake))``) is the
number to watch: it rises while the critic learns, then falls as the generator catches up.
Samples, checkpoints, resuming and ``--short`` work as in dcgan.py.
"""

from __future__ import annotations

import sys

from dcgan import DCGAN, arg_parser, parse_args, train
from gan_base import HorovodSeparateGANTrainer, SeparateGANTrainer, gradient_penalty

from towerpack.trainer import (
    Conv2D,
    Conv2DTranspose,
    FullyConnected,
    LeakyReLU,
    LinearWrap,
    add_moving_summary,
    argscope,
    auto_reuse_variable_scope,
)
from towerpack.trainer.compat import tf, tfv1


class WGANGP(DCGAN):
    """DCGAN's generator and a LayerNorm critic, trained with the Wasserstein loss and the penalty."""

    penalty_weight = 10.0

    @auto_reuse_variable_scope
    def discriminator(self, images):
        """One score per image."""
        nf = self.width
        with argscope(Conv2D, kernel_size=4, strides=2):
            score = (
                LinearWrap(images)
                .Conv2D("conv0", nf, activation=LeakyReLU)
                .Conv2D("conv1", nf * 2)
                .LayerNorm("ln1")
                .LeakyReLU()
                .Conv2D("conv2", nf * 4)
                .LayerNorm("ln2")
                .LeakyReLU()
                .FullyConnected("fct", 1)()
            )
        return tf.reshape(score, [-1])

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
                score_real = self.discriminator(real)
                score_fake = self.discriminator(fake)

        def critic(x):
            with tfv1.variable_scope("discrim", reuse=True):
                return self.discriminator(x)

        with tf.name_scope("WGAN_loss"):
            penalty, norms = gradient_penalty(critic, real, fake)
            distance = tf.subtract(
                tf.reduce_mean(score_real), tf.reduce_mean(score_fake), name="wasserstein_distance"
            )
            self.d_loss = tf.add(-distance, self.penalty_weight * penalty, name="d_loss")
            self.g_loss = tf.negative(tf.reduce_mean(score_fake), name="g_loss")
            norm = tf.reduce_mean(norms, name="gradient_norm")
        add_moving_summary(self.d_loss, self.g_loss, distance, penalty, norm)
        self.collect_variables()

    def optimizer(self):
        lr = tfv1.get_variable("learning_rate", initializer=1e-4, trainable=False)
        return tfv1.train.AdamOptimizer(lr, beta1=0.0, beta2=0.9)


def main(argv=None) -> int:
    parser = arg_parser("wgan-gp", __doc__, steps=500)
    parser.add_argument("--critic-steps", type=int, default=5, help="critic steps per generator step")
    args = parse_args(parser, argv)
    if args.critic_steps < 1:
        parser.error("--critic-steps must be at least 1")

    def make_trainer(data, model, towers, horovod):
        trainer_class = HorovodSeparateGANTrainer if horovod else SeparateGANTrainer
        return trainer_class(data, model, g_period=args.critic_steps, towers=towers)

    def details(stats):
        last = stats[-1] if stats else {}
        key = "WGAN_loss/wasserstein_distance"
        return [f"wasserstein distance (critic's estimate): {last[key]:.4f}"] if key in last else []

    model = WGANGP(32, args.z_dim, args.width)
    train(
        args, model, make_trainer, f"WGAN-GP ({args.critic_steps} critic steps per generator step)", details
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
