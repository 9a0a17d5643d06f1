"""A real model's step rate under towerpack's trainers against raw loops over the same graph.

The model is the example CIFAR ResNet (``examples/resnet/cifar_resnet.py``: towerpack's layers,
BNReLU, BatchNorm moving averages updated every step) on constant random input, so data loading
costs nothing and the comparison is the training loop's own cost:

1. SimpleTrainer (default callbacks) vs ``sess.run(train_op)`` in a loop, where ``train_op``
   also runs the BatchNorm updates; in this process, trials alternating. Goal >= 0.97.
2. HorovodTrainer (2 ranks under ``launch``) vs a raw Horovod loop (same graph, gradients
   all-reduced by hand, broadcast, plain ``sess.run``). Goal >= 0.97.

Each run trains 3 epochs; the first warms up (TensorFlow prepares each new combination of
fetches once: the epoch's last step, which also evaluates the summaries, is one) and the other
two are timed, epoch-end work included. Reported: best of the trials (the least disturbed by
other work). Usage:
``python benchmarks/models.py [--quick] [--repeat N] [--depth N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

EXAMPLE_DIR = Path(__file__).resolve().parent.parent / "examples" / "resnet"
GOAL = 0.97
BATCH = 32

COMMON = f"""
import sys, time
sys.path.insert(0, {str(EXAMPLE_DIR)!r})
import numpy as np
from cifar_resnet import CifarResNet
from towerpack.trainer import TensorInput
from towerpack.trainer.compat import tf, tfv1
STEPS, DEPTH = int(sys.argv[2]), int(sys.argv[3])

def constant_batch():
    rng = np.random.RandomState(0)
    return [tf.constant(rng.uniform(0, 255, ({BATCH}, 32, 32, 3)).astype(np.float32)),
            tf.constant(rng.randint(0, 10, {BATCH}).astype(np.int32))]

def report(rank, rate):
    with open(sys.argv[1] + f".{{rank}}", "w") as f:
        f.write(repr(rate))
"""

TRAINER = (
    COMMON
    + """
from towerpack.trainer import Callback, HorovodTrainer, TrainConfig, launch_train_with_config

class Timer(Callback):
    # Epoch 1 warms up; epochs 2 and 3 (their steps and epoch-end work) are timed.
    _chief_only = False
    def _trigger_epoch(self):
        if self.epoch_num == 1:
            self.t0 = time.perf_counter()
        elif self.epoch_num == 3:
            report(self.trainer.rank, 2 * STEPS / (time.perf_counter() - self.t0))

trainer = HorovodTrainer()
config = TrainConfig(model=CifarResNet(DEPTH, lr=0.01), data=TensorInput(constant_batch), callbacks=[Timer()],
                     steps_per_epoch=STEPS, max_epoch=3)
launch_train_with_config(config, trainer)
"""
)

RAW = (
    COMMON
    + """
import horovod.tensorflow as hvd
from towerpack.trainer import TrainTowerContext
hvd.init()
model = CifarResNet(DEPTH, lr=0.01)
with TrainTowerContext(""):
    cost = model.build_graph(*constant_batch())
opt = model.get_optimizer()
grads = [(hvd.allreduce(g, op=hvd.Average), v) for g, v in opt.compute_gradients(cost) if g is not None]
train_op = tf.group(opt.apply_gradients(grads), *tfv1.get_collection(tfv1.GraphKeys.UPDATE_OPS))
bcast = hvd.broadcast_variables(tfv1.global_variables(), root_rank=0)
with tfv1.Session() as sess:
    sess.run(tfv1.global_variables_initializer())
    sess.run(bcast)
    for k in range(3 * STEPS):
        if k == STEPS:
            t0 = time.perf_counter()
        sess.run(train_op)
    report(hvd.rank(), 2 * STEPS / (time.perf_counter() - t0))
"""
)


def _session_config():
    from towerpack.trainer.compat import tfv1

    return tfv1.ConfigProto(allow_soft_placement=True)


def single_raw(depth: int, steps: int) -> float:
    """``sess.run(train_op)`` over the model's graph, built exactly as the trainer builds it."""
    sys.path.insert(0, str(EXAMPLE_DIR))
    from cifar_resnet import CifarResNet

    from towerpack.trainer import TensorInput, TrainTowerContext
    from towerpack.trainer.compat import tf, tfv1

    graph = tf.Graph()
    with graph.as_default():
        model = CifarResNet(depth, lr=0.01)
        source = TensorInput(_constant_batch)
        source.setup(model.get_input_signature())
        with TrainTowerContext(""):
            cost = model.build_graph(*source.get_input_tensors())
        opt = model.get_optimizer()
        train_op = tf.group(opt.minimize(cost), *tfv1.get_collection(tfv1.GraphKeys.UPDATE_OPS))
        init = tfv1.global_variables_initializer()
    with tfv1.Session(graph=graph, config=_session_config()) as sess:
        sess.run(init)
        for _ in range(steps):
            sess.run(train_op)
        start = time.perf_counter()
        for _ in range(2 * steps):
            sess.run(train_op)
        return 2 * steps / (time.perf_counter() - start)


def _constant_batch():
    import numpy as np

    from towerpack.trainer.compat import tf

    rng = np.random.RandomState(0)
    return [
        tf.constant(rng.uniform(0, 255, (BATCH, 32, 32, 3)).astype(np.float32)),
        tf.constant(rng.randint(0, 10, BATCH).astype(np.int32)),
    ]


def single_trainer(depth: int, steps: int) -> float:
    """SimpleTrainer with the default callbacks; epoch 1 warms up, epochs 2 and 3 (their steps
    and epoch-end work: summaries, monitors) are timed."""
    sys.path.insert(0, str(EXAMPLE_DIR))
    from cifar_resnet import CifarResNet

    from towerpack.trainer import Callback, SimpleTrainer, TensorInput, TrainConfig, launch_train_with_config
    from towerpack.trainer.compat import tf

    class Timer(Callback):
        _chief_only = False

        def _trigger_epoch(self):
            if self.epoch_num == 1:
                self.t0 = time.perf_counter()
            elif self.epoch_num == 3:
                self.rate = 2 * steps / (time.perf_counter() - self.t0)

    timer = Timer()
    config = TrainConfig(
        model=CifarResNet(depth, lr=0.01),
        data=TensorInput(_constant_batch),
        callbacks=[timer],
        session_config=_session_config(),
        steps_per_epoch=steps,
        max_epoch=3,
    )
    with tf.Graph().as_default():
        launch_train_with_config(config, SimpleTrainer())
    return timer.rate


def horovod_rate(kind: str, folder: Path, depth: int, steps: int) -> float:
    script = folder / f"{kind}.py"
    out = folder / f"rate-{kind}"
    cmd = [sys.executable, "-m", "towerpack.launcher", "--np", "2", "--backend", "horovod", str(script)]
    cmd += [str(out), str(steps), str(depth)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return float(Path(f"{out}.0").read_text())


def _interleaved(repeat: int, first, second) -> tuple[list[float], list[float]]:
    a, b = [], []
    for r in range(repeat):
        order = ((a, first), (b, second)) if r % 2 == 0 else ((b, second), (a, first))
        for bucket, fn in order:
            bucket.append(fn())
    return a, b


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and trials (a smoke run)")
    parser.add_argument("--repeat", type=int, default=None, help="trials per case (default 3, quick 1)")
    parser.add_argument("--depth", type=int, default=2, help="residual blocks per stage (6n+2 layers)")
    args = parser.parse_args()
    repeat = args.repeat or (1 if args.quick else 3)
    steps = 5 if args.quick else 30
    n = args.depth
    raw, ours = _interleaved(repeat, lambda: single_raw(n, steps), lambda: single_trainer(n, steps))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "raw.py").write_text(RAW)
        (folder / "trainer.py").write_text(TRAINER)
        hvd_raw, hvd_ours = _interleaved(
            repeat,
            lambda: horovod_rate("raw", folder, n, steps),
            lambda: horovod_rate("trainer", folder, n, steps),
        )
    name = f"ResNet-{6 * n + 2} batch {BATCH}"
    rows = [
        ("simple_trainer_vs_raw_loop", f"{name}: SimpleTrainer vs sess.run loop", ours, raw),
        (
            "horovod_trainer_vs_raw_horovod",
            f"{name}: HorovodTrainer vs raw Horovod (2 ranks)",
            hvd_ours,
            hvd_raw,
        ),
    ]
    print(f"\nmodels: steps/s, best (median) of {repeat} trial(s)")
    print(f"{'case':<58}{'ours':>16}{'raw':>16}{'ratio':>8}")
    for _, label, a, b in rows:
        a_text, b_text = (
            f"{max(a):.2f} ({statistics.median(a):.2f})",
            f"{max(b):.2f} ({statistics.median(b):.2f})",
        )
        print(f"{label:<58}{a_text:>16}{b_text:>16}{max(a) / max(b):>8.3f}")
    for case, _, a, b in rows:
        result = {"benchmark": "models", "case": case, "ours": round(max(a), 3), "baseline": round(max(b), 3)}
        result.update(unit="steps/s", ratio=round(max(a) / max(b), 3), goal=GOAL)
        print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
