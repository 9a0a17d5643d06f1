#!/usr/bin/env python
"""Two ways to write your own trainer (docs/concepts.md, "Write a trainer"):

    python examples/custom_trainer/custom_trainer.py --style train_op
    python examples/custom_trainer/custom_trainer.py --style run_step

Both fit ``y = x @ w + b`` on noisy data read through a QueueInput.

- ``train_op``: build the graph first, create a plain ``Trainer`` and set ``trainer.train_op``.
- ``run_step``: subclass ``Trainer``, build the graph in ``__init__`` and override ``run_step``
  to do more than one op per step: here a gradient step, then every ``project_every`` steps a
  projection that keeps ``||w|| <= max_norm`` (run in the plain session, so callbacks do not see it).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from towerpack.dataflow import BatchData, DataFromList
from towerpack.trainer import ModelSaver, QueueInput, ScalarPrinter, Trainer, add_moving_summary, logger
from towerpack.trainer.compat import tf, tfv1

TRUE_W = np.array([1.5, -2.0, 0.5], np.float32)
TRUE_B = 0.3


def regression_data(n: int = 512, seed: int = 0):
    rng = np.random.RandomState(seed)
    x = rng.randn(n, len(TRUE_W)).astype(np.float32)
    y = (x @ TRUE_W + TRUE_B + 0.05 * rng.randn(n)).astype(np.float32)
    return [[x[i], y[i]] for i in range(n)]


def build_cost(x, y):
    """The model: variables ``w``, ``b`` and the mean-squared-error cost."""
    w = tfv1.get_variable("w", [len(TRUE_W)], initializer=tfv1.zeros_initializer())
    b = tfv1.get_variable("b", [], initializer=tfv1.zeros_initializer())
    cost = tf.reduce_mean(tf.square(tf.linalg.matvec(x, w) + b - y), name="cost")
    add_moving_summary(cost)
    return cost, w


def make_input(batch_size: int = 32) -> QueueInput:
    data = QueueInput(BatchData(DataFromList(regression_data()), batch_size))
    data.setup([tf.TensorSpec([None, len(TRUE_W)], tf.float32, "x"), tf.TensorSpec([None], tf.float32, "y")])
    return data


def train_op_style() -> Trainer:
    """Style 1: the graph exists before the trainer; the trainer only gets a ``train_op``."""
    data = make_input()
    cost, _ = build_cost(*data.get_input_tensors())
    trainer = Trainer()
    trainer.train_op = tfv1.train.AdamOptimizer(0.05).minimize(cost)
    trainer.register_callback(data.get_callbacks())  # the input's callbacks (they feed the queue)
    return trainer


class ProjectedTrainer(Trainer):
    """Style 2: the trainer builds its graph and overrides ``run_step``."""

    def __init__(self, data: QueueInput, max_norm: float, project_every: int = 8):
        super().__init__()
        self.project_every = project_every
        cost, w = build_cost(*data.get_input_tensors())
        self.step_op = tfv1.train.AdamOptimizer(0.05).minimize(cost)
        self.project_op = tfv1.assign(w, tf.clip_by_norm(w, max_norm))
        self.register_callback(data.get_callbacks())

    def run_step(self):
        # The hooked session runs the callbacks' hooks (step counter, summaries): use it once per step.
        self.hooked_sess.run(self.step_op)
        if self.global_step % self.project_every == 0:
            self.sess.run(self.project_op)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--style", choices=["train_op", "run_step"], default="train_op")
    p.add_argument("--max-norm", type=float, default=2.0, help="run_step style: the bound on ||w||")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--logdir", default=None, help="default: train_log/custom-<style>")
    p.add_argument("--short", action="store_true", help="a quick run for CI: 4 epochs")
    args = p.parse_args(argv)
    if args.short:
        args.epochs = min(args.epochs, 4)
    logdir = logger.set_logger_dir(
        args.logdir or os.path.join("train_log", f"custom-{args.style}"), action="d"
    )

    trainer = train_op_style() if args.style == "train_op" else ProjectedTrainer(make_input(), args.max_norm)
    trainer.train_with_defaults(
        callbacks=[ModelSaver(max_to_keep=1)],
        monitors=[ScalarPrinter()],
        steps_per_epoch=16,
        max_epoch=args.epochs,
    )
    reader = tfv1.train.load_checkpoint(logdir)
    w, b = reader.get_tensor("w"), float(reader.get_tensor("b"))
    print(f"\ntrue w {TRUE_W.tolist()} b {TRUE_B}")
    print(f"learned w [{', '.join(f'{v:.3f}' for v in w)}] b {b:.3f} |w| {np.linalg.norm(w):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
