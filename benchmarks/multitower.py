"""Multi-device trainers: training throughput by tower count against SimpleTrainer on one device.

The model is the small convnet of ``trainer_overhead.py`` at a per-tower batch of 32, fed by
QueueInput from pre-made batches. Every trainer runs a warm-up epoch, then timed ones (the
best counts). Each case reports steps/s and samples/s (steps/s x towers x batch); the ratio
to SimpleTrainer is that of samples/s. Without GPUs the towers are logical CPU devices that
share the machine's cores, so the ratio shows what the multi-tower machinery costs (the goal:
at least 0.8 of SimpleTrainer's throughput); with GPUs each tower gets its own GPU (2, 4, 8
towers as far as there are GPUs; one tower on a one-GPU machine) and the ratio is the scaling.

Usage: ``python benchmarks/multitower.py [--quick] [--steps N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from trainer_overhead import ConvNet

from towerpack.trainer import (
    AsyncMultiGPUTrainer,
    SimpleTrainer,
    SyncMultiGPUTrainerParameterServer,
    SyncMultiGPUTrainerReplicated,
    TrainConfig,
    launch_train_with_config,
)
from towerpack.trainer.callbacks import Callback
from towerpack.trainer.compat import tf
from towerpack.trainer.input_source import QueueInput

GOAL = 0.8


class EpochTimer(Callback):
    """Wall time of every epoch."""

    def __init__(self):
        self.elapsed = []

    def _before_epoch(self):
        self.start = time.perf_counter()

    def _after_epoch(self):
        self.elapsed.append(time.perf_counter() - self.start)


TRAINERS = {
    "simple": lambda n: SimpleTrainer(),
    "replicated": lambda n: SyncMultiGPUTrainerReplicated(n),
    "ps": lambda n: SyncMultiGPUTrainerParameterServer(n),
    "async": lambda n: AsyncMultiGPUTrainer(n),
}


def tower_counts(gpus: int, quick: bool) -> list[int]:
    """Tower counts to measure: never more towers than GPUs; logical CPU devices without GPUs."""
    if gpus:
        counts = [n for n in (2, 4, 8) if n <= gpus] or [1]
    else:
        counts = [2, 4]
    return counts[:1] if quick else counts


def steps_per_sec(kind: str, towers: int, steps: int, trials: int) -> float:
    """The best of ``trials`` timed epochs (after one warm-up epoch) of one trainer."""
    model = ConvNet()
    timer = EpochTimer()
    with tf.Graph().as_default():
        config = TrainConfig(
            model=model,
            data=QueueInput(model.data()),
            callbacks=[timer],
            extra_callbacks=[],
            monitors=[],
            steps_per_epoch=steps,
            max_epoch=1 + trials,
        )
        launch_train_with_config(config, TRAINERS[kind](towers))
    return steps / min(timer.elapsed[1:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and cases")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per case")
    args = parser.parse_args()
    steps = args.steps or (50 if args.quick else 300)
    trials = 1 if args.quick else 3
    gpus = len(tf.config.list_physical_devices("GPU"))
    counts = tower_counts(gpus, args.quick)
    cases = [("replicated", n) for n in counts] + [("ps", n) for n in counts] + [("async", counts[0])]
    device = f"{gpus} GPU(s)" if gpus else "logical CPU devices"
    batch = ConvNet.batch

    base_steps = steps_per_sec("simple", 1, steps, trials)
    base = base_steps * batch
    print(
        f"multi-tower convnet, batch {batch} per tower, best of {trials} x {steps} steps, towers on {device}"
    )
    print(f"{'trainer':<12}{'towers':>7}{'steps/s':>10}{'samples/s':>12}{'vs simple':>11}")
    print(f"{'simple':<12}{1:>7}{base_steps:>10.1f}{base:>12.1f}{1.0:>11.2f}")
    results = []
    for kind, n in cases:
        rate = steps_per_sec(kind, n, steps, trials)
        ours = rate * n * batch
        ratio = ours / base
        print(f"{kind:<12}{n:>7}{rate:>10.1f}{ours:>12.1f}{ratio:>11.2f}")
        results.append(
            {
                "benchmark": "multitower",
                "case": f"{kind} x{n} ({'gpu' if gpus else 'cpu'})",
                "ours": round(ours, 1),
                "baseline": round(base, 1),
                "unit": "samples/s",
                "steps_per_s": round(rate, 2),
                "baseline_steps_per_s": round(base_steps, 2),
                "ratio": round(ratio, 3),
                "goal": GOAL if not gpus else None,
            }
        )
    for result in results:
        print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
