"""Trainer overhead: steps/s of towerpack's training loop against a raw ``sess.run(train_op)`` loop.

For two models, (a) a linear 784->10 softmax classifier (batch 64) and (b) a small convnet on
[32, 28, 28, 1], and two input methods, FeedInput (what ``SimpleTrainer`` uses for a DataFlow)
and QueueInput, it measures:

- raw: the same graph and the same input method driven by hand, ``sess.run(train_op)`` in a loop;
- trainer: ``launch_train_with_config(TrainConfig(...), SimpleTrainer())`` with the default
  callbacks (moving-average summaries, progress bar, merged summaries, update ops).

Both sides use the same DataFlow (pre-made random batches, so data loading costs nothing), the
same session config and a warm-up epoch that is not timed; trials alternate between the two
sides. The table shows the best trial of each side (the least disturbed by other work on the
machine), the medians, and the ratio of the bests. Goals: >= 0.85 for (a), >= 0.95 for (b).

Usage: ``python benchmarks/trainer_overhead.py [--quick] [--repeat N]`` (default run < 2 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np

from towerpack.trainer import ModelDesc, SimpleTrainer, TrainConfig, launch_train_with_config
from towerpack.trainer.callbacks import Callback
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.input_source import FeedInput, QueueInput
from towerpack.trainer.summary import add_moving_summary

GOALS = {"linear": 0.85, "convnet": 0.95}


class Batches:
    """A DataFlow cycling over a few pre-made random batches."""

    def __init__(self, shapes_dtypes, n_batches=16, length=100_000, seed=0):
        rng = np.random.RandomState(seed)
        self.batches = []
        for _ in range(n_batches):
            dp = []
            for shape, dtype, high in shapes_dtypes:
                if np.issubdtype(dtype, np.integer):
                    dp.append(rng.randint(0, high, size=shape).astype(dtype))
                else:
                    dp.append(rng.rand(*shape).astype(dtype))
            self.batches.append(dp)
        self.length = length

    def reset_state(self):
        pass

    def __len__(self):
        return self.length

    def __iter__(self):
        for k in range(self.length):
            yield self.batches[k % len(self.batches)]


class Linear(ModelDesc):
    batch = 64

    def inputs(self):
        return [tf.TensorSpec([None, 784], tf.float32, "x"), tf.TensorSpec([None], tf.int32, "label")]

    def build_graph(self, x, label):
        w = tfv1.get_variable("W", [784, 10], initializer=tfv1.glorot_uniform_initializer())
        b = tfv1.get_variable("b", [10], initializer=tfv1.zeros_initializer())
        logits = tf.matmul(x, w) + b
        cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=logits))
        cost = tf.identity(cost, name="cost")
        add_moving_summary(cost)
        return cost

    def optimizer(self):
        return tfv1.train.GradientDescentOptimizer(0.01)

    def data(self):
        return Batches([((self.batch, 784), np.float32, None), ((self.batch,), np.int32, 10)])


class ConvNet(Linear):
    batch = 32

    def inputs(self):
        return [tf.TensorSpec([None, 28, 28, 1], tf.float32, "x"), tf.TensorSpec([None], tf.int32, "label")]

    def build_graph(self, x, label):
        h = x
        for i, ch in enumerate((16, 32)):
            k = tfv1.get_variable(
                f"conv{i}/W", [3, 3, h.shape[-1], ch], initializer=tfv1.glorot_uniform_initializer()
            )
            h = tf.nn.relu(tf.nn.conv2d(h, k, strides=1, padding="SAME"))
            h = tf.nn.max_pool2d(h, 2, 2, "VALID")
        h = tf.reshape(h, [-1, 7 * 7 * 32])
        w = tfv1.get_variable("fc/W", [7 * 7 * 32, 10], initializer=tfv1.glorot_uniform_initializer())
        logits = tf.matmul(h, w)
        cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=logits))
        cost = tf.identity(cost, name="cost")
        add_moving_summary(cost)
        return cost

    def data(self):
        return Batches([((self.batch, 28, 28, 1), np.float32, None), ((self.batch,), np.int32, 10)])


def session_config():
    return tfv1.ConfigProto(allow_soft_placement=True)


def make_input(kind, df):
    return FeedInput(df) if kind == "feed" else QueueInput(df)


def raw_steps_per_sec(model, kind, steps):
    """The same graph and input, driven by hand: warm-up steps, then ``steps`` timed runs."""
    graph = tf.Graph()
    with graph.as_default():
        src = make_input(kind, model.data())
        src.setup(model.get_input_signature())
        cost = model.build_graph(*src.get_input_tensors())
        train_op = model.get_optimizer().minimize(cost)
        init = tfv1.global_variables_initializer()
    with tfv1.Session(graph=graph, config=session_config()) as sess:
        sess.run(init)
        src.reset_state()
        if kind == "feed":
            it = iter(src.ds)
            phs = src.get_input_tensors()
            step = lambda: sess.run(train_op, feed_dict=dict(zip(phs, next(it), strict=True)))
        else:
            src._start_thread(sess)
            step = lambda: sess.run(train_op)
        for _ in range(steps):
            step()
        start = time.perf_counter()
        for _ in range(steps):
            step()
        elapsed = time.perf_counter() - start
        if kind == "queue":
            src._stop_thread()
    return steps / elapsed


class _EpochClock(Callback):
    """Timestamps at the end of every epoch (to time all epochs after the first)."""

    _chief_only = False

    def __init__(self):
        self.marks = []

    def _trigger_epoch(self):
        self.marks.append(time.perf_counter())


def trainer_steps_per_sec(model, kind, steps, epochs=3):
    clock = _EpochClock()
    config = TrainConfig(
        model=model,
        data=make_input(kind, model.data()),
        callbacks=[clock],
        session_config=session_config(),
        steps_per_epoch=steps,
        max_epoch=epochs,
    )
    with tf.Graph().as_default():
        launch_train_with_config(config, SimpleTrainer())
    return (epochs - 1) * steps / (clock.marks[-1] - clock.marks[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and trials (a smoke run)")
    parser.add_argument(
        "--repeat", type=int, default=None, help="trials per measurement (default 5, quick 1)"
    )
    args = parser.parse_args()
    repeat = args.repeat or (1 if args.quick else 5)
    steps = {"linear": 150 if args.quick else 600, "convnet": 20 if args.quick else 80}
    models = {"linear": Linear, "convnet": ConvNet}
    rows = []
    t0 = time.perf_counter()
    for name, cls in models.items():
        for kind in ("feed", "queue"):
            raw, ours = [], []
            for r in range(repeat):
                order = (raw, ours) if r % 2 == 0 else (ours, raw)
                for bucket in order:
                    fn = raw_steps_per_sec if bucket is raw else trainer_steps_per_sec
                    bucket.append(fn(cls(), kind, steps[name]))
            rows.append((name, kind, raw, ours))
    total = time.perf_counter() - t0
    print(f"\ntrainer overhead: steps/s, best (median) of {repeat} trial(s) each, {total:.0f} s in all")
    print(f"{'model':<9} {'input':<6} {'raw':>17} {'trainer':>17} {'ratio':>7} {'goal':>6}")
    ok = True
    for name, kind, raw, ours in rows:
        ratio = max(ours) / max(raw)
        ok &= ratio >= GOALS[name]
        raw_text = f"{max(raw):.1f} ({statistics.median(raw):.1f})"
        ours_text = f"{max(ours):.1f} ({statistics.median(ours):.1f})"
        print(f"{name:<9} {kind:<6} {raw_text:>17} {ours_text:>17} {ratio:>7.3f} {GOALS[name]:>6.2f}")
    print("all goals met" if ok else "some goals missed")
    for name, kind, raw, ours in rows:
        result = {"benchmark": "trainer_overhead", "case": f"{name} {kind}", "ours": round(max(ours), 2)}
        result.update(baseline=round(max(raw), 2), unit="steps/s", ratio=round(max(ours) / max(raw), 3))
        print("RESULT " + json.dumps({**result, "goal": GOALS[name]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
