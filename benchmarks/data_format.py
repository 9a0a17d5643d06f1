"""What channels_first costs on a CPU: the example CIFAR ResNet's training step, channels_first
against channels_last, with TensorFlow's oneDNN off and on.

On a CPU towerpack's layers run the ops that lack NCHW CPU kernels (convolutions, pooling)
through NHWC, between two transposes (towerpack/trainer/models/cpu_layout.py). Cases, each a raw
``sess.run(train_op)`` loop on a constant batch (BatchNorm updates included), steps/s:

1. oneDNN off: channels_first (the transposing path) vs channels_last.
2. oneDNN on: the same two.
3. oneDNN on: channels_first through NHWC vs the native NCHW graph a GPU would get (oneDNN has
   NCHW CPU kernels, TensorFlow's own have not): what the portable graph costs where the native
   one could run.

oneDNN is read when TensorFlow starts, so each setting runs in a process of its own; within a
process the graphs' trials alternate, and the best trial counts. Usage:
``python benchmarks/data_format.py [--quick] [--repeat N] [--depth N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

EXAMPLE_DIR = Path(__file__).resolve().parent.parent / "examples" / "resnet"
BATCH = 32
#: (graph name, data_format, build as with a GPU: native NCHW ops)
GRAPHS = {
    "channels_last": ("channels_last", False),
    "channels_first": ("channels_first", False),
    "channels_first_native": ("channels_first", True),
}


def step_rate(graph_name: str, depth: int, steps: int) -> float:
    """Steps/s of ``sess.run(train_op)`` over the example ResNet built in ``graph_name``'s layout."""
    sys.path.insert(0, str(EXAMPLE_DIR))
    import numpy as np
    from cifar_resnet import CifarResNet

    from towerpack.trainer import TrainTowerContext, cpu_kernels
    from towerpack.trainer.compat import tf, tfv1

    data_format, native = GRAPHS[graph_name]
    rng = np.random.RandomState(0)
    gpus = cpu_kernels.get_num_gpu
    cpu_kernels.get_num_gpu = (lambda: 1) if native else gpus
    try:
        graph = tf.Graph()
        with graph.as_default(), TrainTowerContext(""):
            model = CifarResNet(depth, lr=0.01, data_format=data_format)
            image = tf.constant(rng.uniform(0, 255, (BATCH, 32, 32, 3)).astype(np.float32))
            label = tf.constant(rng.randint(0, 10, BATCH).astype(np.int32))
            cost = model.build_graph(image, label)
            opt = model.get_optimizer()
            train_op = tf.group(opt.minimize(cost), *tfv1.get_collection(tfv1.GraphKeys.UPDATE_OPS))
            init = tfv1.global_variables_initializer()
    finally:
        cpu_kernels.get_num_gpu = gpus
    with tfv1.Session(graph=graph) as sess:
        sess.run(init)
        for _ in range(steps):
            sess.run(train_op)
        start = time.perf_counter()
        for _ in range(2 * steps):
            sess.run(train_op)
        return 2 * steps / (time.perf_counter() - start)


def child(onednn: str, repeat: int, depth: int, steps: int) -> None:
    """Runs in a process with TF_ENABLE_ONEDNN_OPTS=onednn: prints {graph: [rates]} as JSON."""
    names = ["channels_last", "channels_first"] + (["channels_first_native"] if onednn == "1" else [])
    rates: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeat):
        for name in names if r % 2 == 0 else reversed(names):
            rates[name].append(step_rate(name, depth, steps))
    print(json.dumps(rates))


def measure(onednn: str, repeat: int, depth: int, steps: int) -> dict[str, list[float]]:
    cmd = [sys.executable, __file__, "--child", onednn, "--repeat", str(repeat), "--depth", str(depth)]
    cmd += ["--steps", str(steps)]
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS=onednn)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"oneDNN={onednn} run failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and trials (a smoke run)")
    parser.add_argument("--repeat", type=int, default=None, help="trials per graph (default 3, quick 1)")
    parser.add_argument("--depth", type=int, default=3, help="residual blocks per stage (6n+2 layers)")
    parser.add_argument("--steps", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=["0", "1"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    repeat = args.repeat or (1 if args.quick else 3)
    steps = args.steps or (3 if args.quick else 15)
    if args.child is not None:
        child(args.child, repeat, args.depth, steps)
        return 0
    off = measure("0", repeat, args.depth, steps)
    on = measure("1", repeat, args.depth, steps)
    name = f"ResNet-{6 * args.depth + 2} batch {BATCH}"
    vs_last = "channels_first vs channels_last"
    rows = [
        ("channels_first_vs_last_onednn_off", f"oneDNN off: {vs_last}", off, "channels_last"),
        ("channels_first_vs_last_onednn_on", f"oneDNN on: {vs_last}", on, "channels_last"),
        (
            "through_nhwc_vs_native_nchw_onednn_on",
            "oneDNN on: channels_first vs native NCHW",
            on,
            "channels_first_native",
        ),
    ]
    print(f"\ndata_format: {name}, training steps/s (best of {repeat}), {cpu_model()}, {os.cpu_count()} CPUs")
    print(f"{'case':<58}{'ours':>10}{'baseline':>10}{'ratio':>8}")
    for _, label, rates, base in rows:
        a, b = max(rates["channels_first"]), max(rates[base])
        print(f"{label:<58}{a:>10.2f}{b:>10.2f}{a / b:>8.3f}")
    for case, _, rates, base in rows:
        a, b = max(rates["channels_first"]), max(rates[base])
        result = {"benchmark": "data_format", "case": case, "ours": round(a, 3), "baseline": round(b, 3)}
        result.update(unit="steps/s", ratio=round(a / b, 3), goal=None)
        print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
