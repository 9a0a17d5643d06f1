"""Distributed training throughput with 2 ranks on this machine.

1. HorovodTrainer vs a hand-written raw Horovod loop of the same model (same graph, plain
   ``session.run`` of the train op, no callbacks): goal ratio >= 0.95.
2. DistributedTrainerReplicated (tf.train.Server, 1 parameter server) vs HorovodTrainer.

All runs go through ``launch``; each rank times its steps after a warm-up and rank 0's figure
is reported (median over repeats). Usage: ``python benchmarks/distributed.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

COMMON = """
import sys, time
import tensorflow as tf
tfv1 = tf.compat.v1
STEPS, WARMUP, BATCH, DIM, HIDDEN = int(sys.argv[2]), int(sys.argv[3]), 64, 256, 512

def cost_fn(x, y):
    h = x
    for k, width in enumerate([HIDDEN, HIDDEN, 10]):
        w = tfv1.get_variable(f"w{k}", [h.shape[1], width], initializer=tfv1.glorot_uniform_initializer())
        h = tf.matmul(h, w)
        if k < 2:
            h = tf.nn.relu(h)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h), name="cost")

def report(rate):
    with open(sys.argv[1] + f".{RANK}", "w") as f:
        f.write(repr(rate))
"""

TRAINER = (
    COMMON
    + """
from towerpack.trainer import (Callback, DummyConstantInput, DistributedTrainerReplicated, HorovodTrainer,
                               ModelDesc, TrainConfig, launch_train_with_config)

class Model(ModelDesc):
    def inputs(self):
        return [tf.TensorSpec([BATCH, DIM], tf.float32, "x"), tf.TensorSpec([BATCH], tf.int32, "y")]
    def build_graph(self, x, y):
        return cost_fn(x, y)
    def optimizer(self):
        return tfv1.train.MomentumOptimizer(0.01, 0.9)

class Timer(Callback):
    _chief_only = False
    def _trigger_step(self):
        if self.local_step == WARMUP - 1:
            self.t0 = time.perf_counter()
    def _after_train(self):
        report((STEPS - WARMUP) / (time.perf_counter() - self.t0))

trainer = HorovodTrainer() if sys.argv[4] == "horovod" else DistributedTrainerReplicated(1)
RANK = trainer.rank if sys.argv[4] == "horovod" else trainer.task.index
config = TrainConfig(model=Model(), data=DummyConstantInput([[BATCH, DIM], [BATCH]]), callbacks=[Timer()],
                     monitors=[], extra_callbacks=[], steps_per_epoch=STEPS, max_epoch=1)
launch_train_with_config(config, trainer)
"""
)

RAW = (
    COMMON
    + """
import horovod.tensorflow as hvd
tfv1.disable_eager_execution()
hvd.init()
RANK = hvd.rank()
x, y = tf.zeros([BATCH, DIM]), tf.zeros([BATCH], tf.int32)
opt = tfv1.train.MomentumOptimizer(0.01, 0.9)
grads = [(hvd.allreduce(g, op=hvd.Average), v) for g, v in opt.compute_gradients(cost_fn(x, y))]
train_op = opt.apply_gradients(grads)
bcast = hvd.broadcast_variables(tfv1.global_variables(), root_rank=0)
with tfv1.Session() as sess:
    sess.run(tfv1.global_variables_initializer())
    sess.run(bcast)
    for k in range(STEPS):
        if k == WARMUP:
            t0 = time.perf_counter()
        sess.run(train_op)
    report((STEPS - WARMUP) / (time.perf_counter() - t0))
"""
)


def run(kind: str, folder: Path, steps: int, warmup: int) -> float:
    script = folder / ("raw.py" if kind == "raw" else "trainer.py")
    out = folder / f"rate-{kind}"
    backend = ["--backend", "tf-server", "--ps", "1"] if kind == "tf-server" else ["--backend", "horovod"]
    cmd = [sys.executable, "-m", "towerpack.launcher", "--np", "2", *backend, str(script), str(out)]
    cmd += [str(steps), str(warmup), "horovod" if kind == "raw" else kind]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} run failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return float(Path(f"{out}.0").read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and one repeat")
    args = parser.parse_args()
    steps, warmup, repeat = (60, 10, 1) if args.quick else (300, 30, 3)
    rates: dict[str, list[float]] = {"raw": [], "horovod": [], "tf-server": []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "raw.py").write_text(RAW)
        (folder / "trainer.py").write_text(TRAINER)
        for _ in range(repeat):  # interleaved, so that load from other work hits every kind alike
            for kind in rates:
                rates[kind].append(run(kind, folder, steps, warmup))
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"{'case':<48}{'steps/s':>10}")
    for kind, label in [("raw", "raw Horovod loop (2 ranks)"), ("horovod", "HorovodTrainer (2 ranks)"),
                        ("tf-server", "DistributedTrainerReplicated (2 workers, 1 ps)")]:  # fmt: skip
        print(f"{label:<48}{med[kind]:>10.1f}")
    cases = [
        ("horovod_trainer_vs_raw_horovod", med["horovod"], med["raw"], 0.95),
        ("tf_server_vs_horovod_trainer", med["tf-server"], med["horovod"], None),
    ]
    for case, ours, base, goal in cases:
        result = {
            "benchmark": "distributed",
            "case": case,
            "ours": round(ours, 2),
            "baseline": round(base, 2),
        }
        result.update(unit="steps/s", ratio=round(ours / base, 3), goal=goal)
        print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
