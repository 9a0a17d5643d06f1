"""Distributed training throughput with 2 ranks on this machine.

1. HorovodTrainer vs a hand-written raw Horovod loop of the same model (same graph, plain
   ``session.run`` of the train op, no callbacks): goal ratio >= 0.95.
2. CollectiveAllReduceTrainer (TensorFlow's collective all-reduce, gradients packed) vs
   HorovodTrainer.
3. On a deep narrow model of 48 variables, where the cost per transfer shows: the same two, and
   gradient packing, CollectiveAllReduceTrainer with its default ``pack_bytes`` vs one all-reduce
   per variable (``pack_bytes=0``).
4. DistributedTrainerReplicated and DistributedTrainerParameterServer (tf.train.Server, 1
   parameter server) vs HorovodTrainer.

All runs go through ``launch``; each rank times its steps after a warm-up and rank 0's figure
is reported (median over repeats, the kinds interleaved). Usage:
``python benchmarks/distributed.py [--quick]``.
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
STEPS, WARMUP, BATCH, DIM = int(sys.argv[2]), int(sys.argv[3]), 64, 256
# "wide": 3 matrices (0.4 M weights); "deep": 24 layers of 128 units, 48 variables (0.4 M weights).
DEEP = sys.argv[5] == "deep"
WIDTHS = [128] * 23 + [10] if DEEP else [512, 512, 10]

def cost_fn(x, y):
    h = x
    for k, width in enumerate(WIDTHS):
        w = tfv1.get_variable(f"w{k}", [h.shape[1], width], initializer=tfv1.glorot_uniform_initializer())
        h = tf.matmul(h, w)
        if DEEP:
            h = h + tfv1.get_variable(f"b{k}", [width], initializer=tfv1.zeros_initializer())
        if k < len(WIDTHS) - 1:
            h = tf.nn.relu(h)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h), name="cost")

def report(rate):
    with open(sys.argv[1] + f".{RANK}", "w") as f:
        f.write(repr(rate))
"""

TRAINER = (
    COMMON
    + """
from towerpack.trainer import (Callback, CollectiveAllReduceTrainer, DummyConstantInput,
                               DistributedTrainerParameterServer, DistributedTrainerReplicated,
                               HorovodTrainer, ModelDesc, TrainConfig, launch_train_with_config)

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

make = {
    "horovod": HorovodTrainer,
    "collective": CollectiveAllReduceTrainer,
    "collective-unpacked": lambda: CollectiveAllReduceTrainer(pack_bytes=0),
    "tf-server": lambda: DistributedTrainerReplicated(1),
    "tf-server-ps": lambda: DistributedTrainerParameterServer(1),
}
trainer = make[sys.argv[4]]()
RANK = trainer.task.index if sys.argv[4].startswith("tf-server") else trainer.rank
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


# kind: (script, launch backend arguments, model)
KINDS = {
    "raw": ("raw.py", ["--backend", "horovod"], "wide"),
    "horovod": ("trainer.py", ["--backend", "horovod"], "wide"),
    "collective": ("trainer.py", ["--backend", "tf-collective"], "wide"),
    "tf-server": ("trainer.py", ["--backend", "tf-server", "--ps", "1"], "wide"),
    "tf-server-ps": ("trainer.py", ["--backend", "tf-server", "--ps", "1"], "wide"),
    "deep:horovod": ("trainer.py", ["--backend", "horovod"], "deep"),
    "deep:collective": ("trainer.py", ["--backend", "tf-collective"], "deep"),
    "deep:collective-unpacked": ("trainer.py", ["--backend", "tf-collective"], "deep"),
}
LABELS = {
    "raw": "raw Horovod loop",
    "horovod": "HorovodTrainer",
    "collective": "CollectiveAllReduceTrainer",
    "tf-server": "DistributedTrainerReplicated (1 ps)",
    "tf-server-ps": "DistributedTrainerParameterServer (1 ps)",
    "deep:horovod": "deep model: HorovodTrainer",
    "deep:collective": "deep model: CollectiveAllReduceTrainer",
    "deep:collective-unpacked": "deep model: same, pack_bytes=0",
}


def run(kind: str, folder: Path, steps: int, warmup: int) -> float:
    script, backend, model = KINDS[kind]
    out = folder / f"rate-{kind.replace(':', '-')}"
    trainer = "horovod" if kind == "raw" else kind.split(":")[-1]
    cmd = [sys.executable, "-m", "towerpack.launcher", "--np", "2", *backend, str(folder / script), str(out)]
    cmd += [str(steps), str(warmup), trainer, model]
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
    rates: dict[str, list[float]] = {kind: [] for kind in KINDS}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "raw.py").write_text(RAW)
        (folder / "trainer.py").write_text(TRAINER)
        for _ in range(repeat):  # interleaved, so that load from other work hits every kind alike
            for kind in rates:
                rates[kind].append(run(kind, folder, steps, warmup))
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"{'case (2 ranks)':<48}{'steps/s':>10}")
    for kind, label in LABELS.items():
        print(f"{label:<48}{med[kind]:>10.1f}")
    cases = [
        ("horovod_trainer_vs_raw_horovod", med["horovod"], med["raw"], 0.95),
        ("collective_vs_horovod_trainer", med["collective"], med["horovod"], None),
        ("collective_vs_horovod_trainer_deep", med["deep:collective"], med["deep:horovod"], None),
        ("collective_packed_vs_unpacked_deep", med["deep:collective"], med["deep:collective-unpacked"], None),
        ("tf_server_vs_horovod_trainer", med["tf-server"], med["horovod"], None),
        ("tf_server_ps_vs_horovod_trainer", med["tf-server-ps"], med["horovod"], None),
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
