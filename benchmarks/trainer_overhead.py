"""Trainer overhead: steps/s of towerpack's training loop against raw ``sess.run(train_op)`` loops.

For two models, (a) a linear 784->10 softmax classifier (batch 64) and (b) a small convnet on
[32, 28, 28, 1], and two inputs, FeedInput and QueueInput, it measures:

- trainer: ``launch_train_with_config(TrainConfig(...), SimpleTrainer())`` with the default
  callbacks (moving-average summaries, progress bar, merged summaries, update ops) and the
  default monitors; an epoch's steps are timed from the end of its first to the end of its last
  (the summaries fetched with the last step included);
- const: ``sess.run(train_op)`` in a loop on a graph whose input is a constant batch. No input
  pipeline can be faster: this is the limit, and the goals are ratios against it;
- hand loop: the same graph and input driven by hand: ``sess.run(train_op, feed_dict=...)``
  with the batches of the DataFlow, or ``sess.run(train_op)`` with a QueueInput thread running.

All sides use the same pre-made random batches (data loading costs nothing) and the same
session config. The machine may be busy with other work, so the sides are measured in pairs
close in time: after every trainer epoch, a callback runs as many steps of the const loop and
of the hand loop (in their own graphs and sessions, in alternating order). The first epoch and
chunks are warm-up. Short chunks keep the sides of a pair close in time; each ratio is the
median of the per-pair ratios. The table also shows the median and best steps/s of each side.
Goals (trainer / const): linear 0.95 with FeedInput and 0.85 with QueueInput, convnet 0.97.

Position tracking (``TrainConfig(exact_resume=True)``: items carry their positions through the
workers, the trainer logs them) is measured apart, in two cases: the convnet trains on an in-memory
dataset through 2 worker processes (``MultiProcessRunnerZMQ``, batches made in the workers) and a
QueueInput, where the model limits the step rate; and the same with every item costing 0.5 to 4.5 ms
of CPU in the workers (as decoding does), where the workers limit it. Each case runs pairs of short
trainings with tracking off and on, close in time (the order alternates); the ratio is the median
over the pairs of (median epoch rate with tracking on) / (the same with it off) (goal 0.98 in both).

On a machine shared with other work, whole trainings run a few percent faster or slower than the
next one (tracking off against off: pairs from 0.8 to 1.2 measured here under a load of 2); take the
tracking numbers when the machine is otherwise idle, with enough pairs.

Usage: ``python benchmarks/trainer_overhead.py [--quick] [--pairs N] [--only-tracking] [--tracking-pairs N]``
(default run ~5 minutes).
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

from towerpack.dataflow import BatchData, MultiProcessRunnerZMQ
from towerpack.dataflow.dataset.base import ArrayDataset
from towerpack.trainer import ModelDesc, SimpleTrainer, TrainConfig, launch_train_with_config
from towerpack.trainer.callbacks import Callback
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.input_source import FeedInput, QueueInput
from towerpack.trainer.summary import add_moving_summary

#: Goals of trainer / const, by (model, input).
GOALS = {
    ("linear", "feed"): 0.95,
    ("linear", "queue"): 0.85,
    ("convnet", "feed"): 0.97,
    ("convnet", "queue"): 0.97,
}


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


class RawLoop:
    """A hand-written loop in a graph and session of its own: ``const`` (the input is one
    constant batch), ``feed`` (feed_dict) or ``queue`` (a QueueInput thread fills the queue)."""

    def __init__(self, model, kind):
        self.kind = kind
        graph = tf.Graph()
        with graph.as_default():
            if kind == "const":
                inputs = [tf.constant(a) for a in model.data().batches[0]]
            else:
                self.src = make_input(kind, model.data())
                self.src.setup(model.get_input_signature())
                inputs = self.src.get_input_tensors()
            train_op = model.get_optimizer().minimize(model.build_graph(*inputs))
            init = tfv1.global_variables_initializer()
        self.sess = tfv1.Session(graph=graph, config=session_config())
        self.sess.run(init)
        if kind == "feed":
            self.src.reset_state()
            batches, phs = iter(self.src.ds), inputs
            self.step = lambda: self.sess.run(train_op, feed_dict=dict(zip(phs, next(batches), strict=True)))
        else:
            if kind == "queue":
                self.src.reset_state()
                self.src.start_thread(self.sess)
            self.step = lambda: self.sess.run(train_op)

    def steps_per_sec(self, steps: int) -> float:
        start = time.perf_counter()
        for _ in range(steps):
            self.step()
        return steps / (time.perf_counter() - start)

    def close(self):
        if self.kind == "queue":
            self.src.stop_thread()
        self.sess.close()


class PairedChunks(Callback):
    """Times the steps of every epoch (from the end of its first step to the end of its last),
    and right after the epoch as many steps of each raw loop."""

    _chief_only = False

    def __init__(self, loops: dict[str, RawLoop], steps: int):
        self.loops = loops
        self.steps = steps
        self.rates: dict[str, list[float]] = {"trainer": [], **{name: [] for name in loops}}

    def _trigger_step(self):
        if self.local_step == 0:
            self._start = time.perf_counter()
        elif self.local_step == self.steps - 1:
            self._epoch_rate = (self.steps - 1) / (time.perf_counter() - self._start)

    def _trigger_epoch(self):
        names = list(self.loops) if self.epoch_num % 2 else list(reversed(self.loops))
        rates = {name: self.loops[name].steps_per_sec(self.steps) for name in names}
        if self.epoch_num > 1:  # the first epoch and chunks are warm-up
            self.rates["trainer"].append(self._epoch_rate)
            for name, rate in rates.items():
                self.rates[name].append(rate)


def measure(cls, kind: str, steps: int, pairs: int) -> dict[str, list[float]]:
    """Steps/s of the trainer's epochs and of the raw loops' chunks, pair by pair."""
    loops = {"const": RawLoop(cls(), "const"), "hand": RawLoop(cls(), kind)}
    clock = PairedChunks(loops, steps)
    config = TrainConfig(
        model=cls(),
        data=make_input(kind, cls().data()),
        callbacks=[clock],
        session_config=session_config(),
        steps_per_epoch=steps,
        max_epoch=pairs + 1,
    )
    try:
        with tf.Graph().as_default():
            launch_train_with_config(config, SimpleTrainer())
    finally:
        for loop in loops.values():
            loop.close()
    return clock.rates


#: Goal of the step rate with position tracking on / off, when the model and when the workers limit it.
TRACKING_GOAL = 0.98


class Rows(ArrayDataset):
    """Random 28x28x1 images and labels, in a shuffled (seed, epoch) order; with ``cost``, reading
    item ``i`` takes 0.5 to 4.5 ms of CPU (the same for an item in every run)."""

    _columns = ("x", "label")

    def __init__(self, n: int, cost: bool = False):
        rng = np.random.RandomState(0)
        self.x = rng.rand(n, 28, 28, 1).astype(np.float32)
        self.label = rng.randint(0, 10, size=n).astype(np.int32)
        self.cost = (0.5 + 4.0 * rng.rand(n)) / 1000 if cost else None
        self._init_order(True, training=True)

    def _get(self, index):
        if self.cost is not None:
            end = time.perf_counter() + self.cost[index]
            while time.perf_counter() < end:
                pass
        return super()._get(index)


class EpochRates(Callback):
    """Steps/s of every epoch after the first (from the end of its first step to the end of its last)."""

    _chief_only = False

    def __init__(self, steps: int):
        self.steps, self.rates = steps, []

    def _trigger_step(self):
        if self.local_step == 0:
            self._start = time.perf_counter()
        elif self.local_step == self.steps - 1 and self.epoch_num > 1:
            self.rates.append((self.steps - 1) / (time.perf_counter() - self._start))


def measure_tracking(rounds: int, epochs: int, items: int, cost: bool) -> dict[bool, list[float]]:
    """Median epoch rate of each training with position tracking off (False) and on (True), one of
    each per round; ``cost``: the items cost CPU in the workers (input-bound)."""
    rates: dict[bool, list[float]] = {False: [], True: []}
    for r in range(rounds):
        for tracking in (False, True) if r % 2 == 0 else (True, False):
            df = MultiProcessRunnerZMQ(BatchData(Rows(items, cost), ConvNet.batch), num_proc=2)
            steps = items // ConvNet.batch
            clock = EpochRates(steps)
            config = TrainConfig(
                model=ConvNet(),
                data=QueueInput(df),
                callbacks=[clock],
                session_config=session_config(),
                steps_per_epoch=steps,
                max_epoch=epochs,
                exact_resume=tracking,
            )
            with tf.Graph().as_default():
                launch_train_with_config(config, SimpleTrainer())
            rates[tracking].append(statistics.median(clock.rates))
    return rates


def median_ratio(a: list[float], b: list[float]) -> float:
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and pairs (a smoke run)")
    parser.add_argument("--pairs", type=int, default=None, help="timed pairs per case (default 40, quick 3)")
    parser.add_argument("--only-tracking", action="store_true", help="only the position tracking cases")
    parser.add_argument(
        "--tracking-pairs",
        type=int,
        default=None,
        help="pairs per position tracking case (default 8, quick 2)",
    )
    args = parser.parse_args()
    pairs = args.pairs or (3 if args.quick else 40)
    steps = {"linear": 100 if args.quick else 400, "convnet": 10 if args.quick else 40}
    models = {"linear": Linear, "convnet": ConvNet}
    t0 = time.perf_counter()
    results = {}
    if not args.only_tracking:
        results = {
            (m, k): measure(cls, k, steps[m], pairs) for m, cls in models.items() for k in ("feed", "queue")
        }
    rounds = args.tracking_pairs or (2 if args.quick else 8)
    tracking = {  # the model limits the step rate; the workers do
        "model": measure_tracking(
            rounds, epochs=3 if args.quick else 5, items=2048 if args.quick else 8192, cost=False
        ),
        "input": measure_tracking(
            rounds, epochs=3 if args.quick else 4, items=256 if args.quick else 768, cost=True
        ),
    }
    total = time.perf_counter() - t0

    hand_name = {"feed": "feed_dict", "queue": "queue"}
    print(f"\ntrainer overhead: steps/s, median (best) of {pairs} pairs per case, {total:.0f} s in all")
    columns = ("trainer", "const", "hand loop")
    print(f"{'model':<8} {'input':<6}" + "".join(f" {c:>16}" for c in columns) + "  / const  / hand  goal")
    ok = True
    for (name, kind), rates in results.items():
        ratio = median_ratio(rates["trainer"], rates["const"])
        goal = GOALS[(name, kind)]
        ok &= ratio >= goal
        cells = [
            f"{statistics.median(rates[s]):.1f} ({max(rates[s]):.1f})" for s in ("trainer", "const", "hand")
        ]
        vs_hand = median_ratio(rates["trainer"], rates["hand"])
        print(
            f"{name:<8} {kind:<6} {cells[0]:>16} {cells[1]:>16} {cells[2]:>16} {ratio:>8.3f} {vs_hand:>7.3f} "
            f"{goal:>5.2f}   (hand loop: {hand_name[kind]})"
        )
    tracking_results = []
    for limit, rates in tracking.items():
        on, off = statistics.median(rates[True]), statistics.median(rates[False])
        ratio = median_ratio(rates[True], rates[False])
        ok &= ratio >= TRACKING_GOAL
        print(
            f"position tracking, {limit}-bound (convnet, 2 workers, queue): on {on:.1f} "
            f"({max(rates[True]):.1f}), off {off:.1f} ({max(rates[False]):.1f}) steps/s, on / off "
            f"{ratio:.3f} (median of {len(rates[True])} pairs), goal {TRACKING_GOAL}"
        )
        tracking_results.append((limit, on, off, ratio))
    print("all goals met" if ok else "some goals missed")
    for (name, kind), rates in results.items():
        result = {"benchmark": "trainer_overhead", "case": f"{name} {kind} vs const"}
        result.update(
            ours=round(statistics.median(rates["trainer"]), 2),
            baseline=round(statistics.median(rates["const"]), 2),
        )
        result.update(
            unit="steps/s",
            ratio=round(median_ratio(rates["trainer"], rates["const"]), 3),
            goal=GOALS[(name, kind)],
        )
        print("RESULT " + json.dumps(result))
    for limit, on, off, ratio in tracking_results:
        result = {"benchmark": "trainer_overhead", "case": f"position tracking on vs off, {limit}-bound"}
        result.update(ours=round(on, 2), baseline=round(off, 2), unit="steps/s", ratio=round(ratio, 3))
        result.update(goal=TRACKING_GOAL)
        print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
