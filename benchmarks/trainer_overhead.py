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
of CPU in the workers (as decoding does), where the workers limit it. Whole trainings one after the
other differ by more than tracking could (the load of other work changes within seconds: pairs of
trainings from 0.8 to 1.2 under a load of 2), so the two sides run at once, in one process, taking
turns: a training with tracking off and one with it on alternate a chunk of steps at a time (32
steps, or 6 when input-bound; a fraction of a second), the waiting side's workers stopped, and each
pair of adjacent chunks (the same batches of the same epochs) gives a ratio. The ratio is the median
over all pairs of ``--tracking-pairs`` pairs of trainings (the side built and started first
alternates), shown with a 95% interval of that median (pairs of trainings resampled) and the middle
half of the pairs (goal 0.98 in both cases). Each chunk also counts the CPU time its workers, its
enqueue thread and its trainer thread took (Linux schedstat, thread time), so that what tracking adds
to a step is also measured in the training itself, in microseconds.

Besides, what tracking adds to a step is timed part by part on the same pipeline's objects (the
source's keys, the batch's join, the worker's encode, the extra frame on the socket, the runner's
decode, the trainer's log and its settle into the ledger), tracking on against off, in microseconds
and as a share of the step with tracking off.

Usage: ``python benchmarks/trainer_overhead.py [--quick] [--pairs N] [--only-tracking] [--tracking-pairs N]``
(default run ~5 minutes).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import signal
import statistics
import sys
import threading
import time
from dataclasses import dataclass

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np
import zmq

from towerpack.dataflow import BatchData, MultiProcessRunnerZMQ, PositionMode, PositionTracker
from towerpack.dataflow.dataset.base import ArrayDataset
from towerpack.dataflow.parallel.workers import ipc_address
from towerpack.dataflow.pipeline.stream import repeat_forever
from towerpack.dataflow.wire.codec import decode_message, encode
from towerpack.trainer import ModelDesc, SimpleTrainer, TrainConfig, launch_train_with_config
from towerpack.trainer.callbacks import Callback
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.input_source import FeedInput, QueueInput
from towerpack.trainer.position_exchange import SETTLE_EVERY
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
    item ``i`` takes 0.5 to 4.5 ms of CPU (the same for an item in every run; CPU time of the thread, so
    that a worker stopped or preempted mid-item still spends all of it)."""

    _columns = ("x", "label")

    def __init__(self, n: int, cost: bool = False):
        rng = np.random.RandomState(0)
        self.x = rng.rand(n, 28, 28, 1).astype(np.float32)
        self.label = rng.randint(0, 10, size=n).astype(np.int32)
        self.cost = (0.5 + 4.0 * rng.rand(n)) / 1000 if cost else None
        self._init_order(True, training=True)

    def _get(self, index):
        if self.cost is not None:
            end = time.thread_time() + self.cost[index]
            while time.thread_time() < end:
                pass
        return super()._get(index)


#: Seconds a training waits for its turn (or for the other to start) before the benchmark gives up.
TURN_TIMEOUT_S = 600.0


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


class Turns:
    """Two trainings in one process, one per thread, that take turns a chunk of steps at a time, so
    that the sides of a pair run a fraction of a second apart. The waiting side's worker processes are
    stopped (SIGSTOP): they neither take CPU from the running side nor fill its buffers ahead."""

    def __init__(self, first: bool):
        self._cond = threading.Condition()
        self._first = first  # the side that runs the first chunk
        self._turn: bool | None = None
        self._pids: dict[bool, list[int]] = {}
        self._done: set[bool] = set()

    def join(self, side: bool, pids: list[int]) -> None:
        """``side`` is ready to train, its workers started: stop them and wait for its turn."""
        _signal(pids, signal.SIGSTOP)
        with self._cond:
            self._pids[side] = pids
            if len(self._pids) == 2:
                self._turn = self._first
            self._cond.notify_all()
        self._wait(side)

    def joined(self, side: bool) -> None:
        """Wait until ``side`` has joined (or ended), before the other side builds its graph."""
        with self._cond:
            if not self._cond.wait_for(lambda: side in self._pids or side in self._done, TURN_TIMEOUT_S):
                raise RuntimeError(f"the training with tracking {'on' if side else 'off'} did not start")

    def pass_on(self, side: bool) -> None:
        """``side`` has run its chunk: the other side's turn, then wait for the next."""
        with self._cond:
            if (not side) in self._done:  # the other has ended: go on alone
                return
            _signal(self._pids[side], signal.SIGSTOP)
            self._turn = not side
            self._cond.notify_all()
        self._wait(side)

    def _wait(self, side: bool) -> None:
        with self._cond:
            mine = self._cond.wait_for(lambda: self._turn == side or (not side) in self._done, TURN_TIMEOUT_S)
            if not mine:
                raise RuntimeError("the other training did not give its turn back")
            _signal(self._pids[side], signal.SIGCONT)

    def finish(self, side: bool) -> None:
        """``side`` has ended (or failed): its workers stop, the other side goes on alone."""
        with self._cond:
            _signal(self._pids.get(side, []), signal.SIGSTOP)
            self._done.add(side)
            self._turn = not side
            self._cond.notify_all()

    def release(self) -> None:
        """Let every worker run again (to be closed)."""
        with self._cond:
            for pids in self._pids.values():
                _signal(pids, signal.SIGCONT)


def _task_cpu_s(task: str) -> float:
    """CPU seconds a Linux task (``/proc/<pid>/task/<tid>``) has run: its schedstat, in nanoseconds."""
    try:
        with open(f"{task}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except FileNotFoundError:  # the task has ended
        return 0.0


def _process_cpu_s(pid: int) -> float:
    tasks = f"/proc/{pid}/task"
    return sum(_task_cpu_s(f"{tasks}/{tid}") for tid in os.listdir(tasks))


@dataclass(frozen=True)
class Chunk:
    """One side's chunk of steps: its rate (steps/s) and the CPU it took, in microseconds per step, in
    the workers, the enqueue thread and the trainer thread (TensorFlow's threads aside)."""

    rate: float
    cpu_us: dict[str, float]


class TakeTurns(Callback):
    """One side of :class:`Turns`: a :class:`Chunk` for each of its chunks of ``chunk`` steps after the
    first ``warmup`` steps, timed from the moment it has its turn to the end of the chunk's last step."""

    _chief_only = False

    def __init__(self, turns: Turns, side: bool, source: QueueInput, chunk: int, warmup: int):
        self.turns, self.side, self.source, self.runner = turns, side, source, source.ds
        self.chunk, self.warmup = chunk, warmup
        self.chunks: list[Chunk] = []
        self._steps = 0

    def _cpu_s(self) -> dict[str, float]:
        return {
            "workers": sum(_process_cpu_s(pid) for pid in self.runner.worker_pids),
            "enqueue thread": _task_cpu_s(f"/proc/self/task/{self.source.thread.native_id}"),
            "trainer thread": time.thread_time(),
        }

    def _begin(self):
        self._cpu, self._start = self._cpu_s(), time.perf_counter()

    def _before_train(self):
        pids = self.runner.worker_pids  # the input source has started them
        if len(pids) != self.runner.num_proc:
            raise RuntimeError(f"expected {self.runner.num_proc} worker processes, found {pids}")
        self.turns.join(self.side, pids)
        self._begin()

    def _trigger_step(self):
        self._steps += 1
        if self._steps % self.chunk:
            return
        if self._steps > self.warmup:
            rate = self.chunk / (time.perf_counter() - self._start)
            cpu = {k: (v - self._cpu[k]) * 1e6 / self.chunk for k, v in self._cpu_s().items()}
            self.chunks.append(Chunk(rate, cpu))
        self.turns.pass_on(self.side)
        self._begin()


def _train(config: TrainConfig, turns: Turns, side: bool, errors: list[BaseException]) -> None:
    try:
        with tf.Graph().as_default():
            launch_train_with_config(config, SimpleTrainer())
    except BaseException as e:  # raised again by the main thread
        errors.append(e)
    finally:
        turns.finish(side)


def measure_tracking(
    rounds: int, epochs: int, items: int, chunk: int, cost: bool
) -> list[list[tuple[Chunk, Chunk]]]:
    """For each of ``rounds`` pairs of trainings taking turns (:class:`Turns`), one with position
    tracking off and one with it on, the ``(off, on)`` pairs of their adjacent chunks of ``chunk``
    steps, ``epochs`` epochs after a warm-up one. The side that is built and starts first alternates;
    ``cost``: the items cost CPU in the workers (input-bound)."""
    rounds_pairs: list[list[tuple[Chunk, Chunk]]] = []
    steps = items // ConvNet.batch
    for r in range(rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        turns, errors = Turns(first=order[0]), []
        sides: dict[bool, TakeTurns] = {}
        threads = []
        try:
            for tracking in order:
                source = QueueInput(MultiProcessRunnerZMQ(BatchData(Rows(items, cost), ConvNet.batch), 2))
                sides[tracking] = TakeTurns(turns, tracking, source, chunk, warmup=steps)
                config = TrainConfig(
                    model=ConvNet(),
                    data=source,
                    callbacks=[sides[tracking]],
                    session_config=session_config(),
                    steps_per_epoch=steps,
                    max_epoch=1 + epochs,
                    exact_resume=tracking,
                )
                thread = threading.Thread(target=_train, args=(config, turns, tracking, errors), daemon=True)
                thread.start()
                threads.append(thread)
                turns.joined(tracking)  # one graph built at a time
            for thread in threads:
                thread.join()
        finally:
            turns.release()
            for side in sides.values():
                side.runner.close()
        if errors:
            raise errors[0]
        rounds_pairs.append(list(zip(sides[False].chunks, sides[True].chunks, strict=True)))
    return rounds_pairs


def ratio_spread(rounds_pairs: list[list[tuple[Chunk, Chunk]]]) -> tuple[float, float, float, float, float]:
    """Of the ratios on / off of the pairs of chunks of each pair of trainings: the median of all, a 95%
    interval of that median and the middle half (quartiles) of the ratios. The interval resamples whole
    pairs of trainings (bootstrap), not chunks: what makes one training faster than another may last
    its whole life, so its chunks are not taken to be independent samples."""
    ratios = [[on.rate / off.rate for off, on in pairs] for pairs in rounds_pairs]
    pooled = [x for r in ratios for x in r]
    rng = random.Random(0)
    medians = sorted(
        statistics.median([x for r in rng.choices(ratios, k=len(ratios)) for x in r]) for _ in range(1000)
    )
    quartiles = statistics.quantiles(pooled, n=4) if len(pooled) > 1 else pooled * 3
    return statistics.median(pooled), medians[25], medians[974], quartiles[0], quartiles[2]


# -- what tracking costs a step, part by part, on the objects of the tracking cases' pipeline -----

#: The parts of a step's tracking cost, in the order an item meets them.
COST_PARTS = {
    "source": "source: a key per item (x items per step)",
    "batch": "BatchData: the items' keys joined into the batch's tag",
    "encode": "worker: encode [tag, batch] instead of batch",
    "transport": "ZMQ: send and receive the tag's frame",
    "decode": "runner: decode [tag, batch] and unwrap it",
    "consume": "input source: tracker.iterate() logs the tag",
    "settle": "settle: the log into the ledger (every 64 steps, per step)",
}


#: Items of the passes timed, and calls per timing of the other parts.
PASS_ITEMS, CALLS = 1024, 64


def _paired_us(on, off, calls: int, repeats: int, clock=time.perf_counter) -> float:
    """Microseconds a call of ``on`` takes more than one of ``off``: the median of 5 estimates, each
    from the best (least disturbed) timing of each side over ``repeats`` interleaved timings of
    ``calls`` calls, by ``clock``."""
    estimates = []
    for _ in range(5):
        best = {on: float("inf"), off: float("inf")}
        for r in range(repeats):
            for fn in (on, off) if r % 2 == 0 else (off, on):
                start = clock()
                for _ in range(calls):
                    fn()
                best[fn] = min(best[fn], (clock() - start) / calls)
        estimates.append(best[on] - best[off])
    return statistics.median(estimates) * 1e6


def _passes(df):
    """A function that iterates one pass of ``df``."""

    def run():
        for _ in df:
            pass

    return run


def _tracked(df):
    """``df``'s tracker, started in tag mode (as ``TrainConfig(exact_resume=True)`` starts it)."""
    tracker = PositionTracker.of(df)
    tracker.start(None, PositionMode.TAGS)
    return tracker


def tracking_costs(items: int = 8192, repeats: int = 30) -> dict[str, float]:
    """Microseconds per training step (one batch of ``ConvNet.batch`` items) that each part of
    position tracking adds (:data:`COST_PARTS`), timed on the tracking cases' own objects, tracking on
    against off, in this process (what a worker and what the trainer's process does).

    Each side is timed ``repeats`` times, interleaved, and its best timing counts (the one least
    disturbed by other work; the median of 5 such estimates is taken): timings are short (passes over
    ``PASS_ITEMS`` items, or ``CALLS`` calls), so that many of them run undisturbed on a busy machine.
    """
    batch = ConvNet.batch
    steps = items // batch
    # The tracking cases' pipeline, its workers not started: what a worker runs is runner.ds.
    runners = {on: MultiProcessRunnerZMQ(BatchData(Rows(items), batch), num_proc=2) for on in (True, False)}
    tracker = _tracked(runners[True])
    batches = {on: r.ds for on, r in runners.items()}
    for b in batches.values():
        b.reset_state()
    tags = []  # the tags of the first epochs' batches, for the settle
    for _ in range(-(-repeats * SETTLE_EVERY // steps)):
        tags += [batches[True].position_tag for _ in batches[True]]
    dp = next(iter(batches[True]))
    tag = batches[True].position_tag

    # Passes over a smaller dataset: short timings, more of them undisturbed (the per-item costs are the
    # same; measured: 8192 items give the same source cost, with more noise).
    short = {on: BatchData(Rows(PASS_ITEMS), batch) for on in (True, False)}
    _tracked(short[True])
    sources = {on: b.ds for on, b in short.items()}
    us = {"source": _paired_us(_passes(sources[True]), _passes(sources[False]), 1, repeats)}
    us["source"] *= batch / PASS_ITEMS
    us["batch"] = _paired_us(_passes(short[True]), _passes(short[False]), 1, repeats) / (PASS_ITEMS // batch)
    us["batch"] -= us["source"]
    us["encode"] = _paired_us(lambda: encode([tag, dp]), lambda: encode(dp), CALLS, repeats)

    frames = {True: encode([tag, dp]), False: encode(dp)}
    ctx = zmq.Context()
    push, pull = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    try:
        address = ipc_address("tracking-costs")
        pull.bind(address)
        push.connect(address)

        def stream(on, n=CALLS):  # a stream of messages, as workers send them
            for _ in range(n):
                push.send_multipart(frames[on], copy=False)
            return [pull.recv_multipart(copy=False) for _ in range(n)][-1]

        # CPU time of the process, its ZMQ I/O thread's included (wall times vary more with the
        # I/O thread's wake-ups than the frame costs).
        trip = (lambda: stream(True), lambda: stream(False))
        us["transport"] = _paired_us(*trip, 1, 4 * repeats, time.process_time) / CALLS
        received = {on: stream(on, 1) for on in (True, False)}
    finally:
        push.close(linger=0)
        pull.close(linger=0)
        ctx.term()

    def unwrap():  # as the runner's merge does
        runners[True].position_tag, got = decode_message(received[True])
        return got

    us["decode"] = _paired_us(unwrap, lambda: decode_message(received[False]), CALLS, repeats)

    # The trainer's loop over datapoints of one item, tagged on both sides: the difference is the log.
    rows = {on: Rows(PASS_ITEMS) for on in (True, False)}
    logged = _tracked(rows[True]).iterate()
    _tracked(rows[False])
    plain = repeat_forever(rows[False])
    us["consume"] = _paired_us(lambda: _consume(logged, CALLS), lambda: _consume(plain, CALLS), 1, repeats)
    us["consume"] /= CALLS

    settle, taken = float("inf"), iter(tags)
    for _ in range(repeats):
        for _ in range(SETTLE_EVERY):
            tracker.log.append(next(taken))
        start = time.perf_counter()
        tracker.settle(tracker.log.appended)
        settle = min(settle, time.perf_counter() - start)
    us["settle"] = settle * 1e6 / SETTLE_EVERY
    return us


def _consume(iterator, n: int) -> None:
    """Take ``n`` items of ``iterator``."""
    next(itertools.islice(iterator, n, n), None)


def median_ratio(a: list[float], b: list[float]) -> float:
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def report_tracking(
    tracking: dict[str, list[list[tuple[Chunk, Chunk]]]], costs: dict[str, float]
) -> tuple[bool, list[dict]]:
    """Print the position tracking cases (``tracking``, by what limits the step rate) and the cost
    breakdown; whether the goals are met, and the RESULT records."""
    ok, results, step_us = True, [], {}
    for limit, rounds_pairs in tracking.items():
        pairs = [p for r in rounds_pairs for p in r]
        on, off = (statistics.median(p[side].rate for p in pairs) for side in (1, 0))
        ratio, low, high, q1, q3 = ratio_spread(rounds_pairs)
        ok &= ratio >= TRACKING_GOAL
        print(
            f"position tracking, {limit}-bound (convnet, 2 workers, queue): on {on:.1f}, off {off:.1f} "
            f"steps/s (medians); on / off {ratio:.3f}, 95% interval {low:.3f}-{high:.3f}, middle half "
            f"{q1:.3f}-{q3:.3f} ({len(pairs)} pairs of chunks, {len(rounds_pairs)} of trainings), "
            f"goal {TRACKING_GOAL}"
        )
        print(
            "  on / off of each pair of trainings: "
            + " ".join(f"{ratio_spread([r])[0]:.3f}" for r in rounds_pairs)
        )
        cpu = {
            k: statistics.median(on.cpu_us[k] - off.cpu_us[k] for off, on in pairs)
            for k in pairs[0][0].cpu_us
        }
        off_cpu = {k: statistics.median(off.cpu_us[k] for off, _ in pairs) for k in cpu}
        parts = ", ".join(f"{k} {cpu[k]:+.1f} (of {off_cpu[k]:.0f})" for k in cpu)
        print(f"  CPU per step in the training, on - off (median of the pairs), us: {parts}")
        step_us[limit] = 1e6 / off
        results.append(
            {
                "case": f"position tracking on vs off, {limit}-bound",
                "ours": round(on, 2),
                "baseline": round(off, 2),
            }
            | {"unit": "steps/s", "ratio": round(ratio, 3), "goal": TRACKING_GOAL}
        )
        if limit == "model":  # input-bound, the items' own CPU (80 ms a step) drowns the workers' share
            in_situ = sum(cpu.values())
            results.append(
                {"case": "position tracking CPU per step in the training, model-bound (vs the step)"}
                | {"ours": round(in_situ, 2), "baseline": round(step_us[limit], 1), "unit": "us"}
                | {"ratio": round(in_situ / step_us[limit], 5), "goal": None}
            )
    total_us = sum(costs.values())
    print("what position tracking costs a step, on / off of this pipeline's objects (us):")
    for part, us in costs.items():
        print(f"  {us:7.2f}  {COST_PARTS[part]}")
    shares = [f"{total_us / us:.2%} of a {limit}-bound step ({us:.0f} us)" for limit, us in step_us.items()]
    print(f"  {total_us:7.2f}  in all: " + ", ".join(shares))
    for part, us in [*costs.items(), ("total", total_us)]:
        case = f"position tracking cost per step: {COST_PARTS.get(part, 'in all')} (vs a model-bound step)"
        results.append(
            {"case": case, "ours": round(us, 2), "baseline": round(step_us["model"], 1), "unit": "us"}
            | {"ratio": round(us / step_us["model"], 5), "goal": None}
        )
    return ok, results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and pairs (a smoke run)")
    parser.add_argument("--pairs", type=int, default=None, help="timed pairs per case (default 40, quick 3)")
    parser.add_argument("--only-tracking", action="store_true", help="only the position tracking cases")
    parser.add_argument(
        "--tracking-pairs",
        type=int,
        default=None,
        help="pairs of trainings (tracking off and on, taking turns) per position tracking case (default 6, "
        "quick 2)",
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
    rounds = args.tracking_pairs or (2 if args.quick else 6)
    costs = tracking_costs(repeats=5 if args.quick else 30)
    tracking = {  # the model limits the step rate; the workers do
        "model": measure_tracking(
            rounds, epochs=1 if args.quick else 4, items=2048 if args.quick else 8192, chunk=32, cost=False
        ),
        "input": measure_tracking(
            rounds, epochs=1 if args.quick else 4, items=384 if args.quick else 768, chunk=6, cost=True
        ),
    }
    total = time.perf_counter() - t0

    hand_name = {"feed": "feed_dict", "queue": "queue"}
    print(f"\ntrainer overhead, {total:.0f} s in all")
    if results:
        print(f"steps/s, median (best) of {pairs} pairs per case")
        columns = "".join(f" {c:>16}" for c in ("trainer", "const", "hand loop"))
        print(f"{'model':<8} {'input':<6}{columns}  / const  / hand  goal")
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
    tracking_ok, tracking_results = report_tracking(tracking, costs)
    ok &= tracking_ok
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
    for result in tracking_results:
        print("RESULT " + json.dumps({"benchmark": "trainer_overhead", **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
