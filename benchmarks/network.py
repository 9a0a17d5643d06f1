"""All-reduce and training over real links: network namespaces joined by rate-limited veth links.

Each node is a network namespace whose only link to the others is a veth pair through a bridge,
limited to a rate in both directions (``tc tbf``); one ``launch --nnodes N --node-rank R`` runs in
each, one rank per node, so every byte between ranks crosses a link. Needs root (``ip netns``).

1. All-reduce bus bandwidth, fp32 gradients of 1, 10 and 100 MB, with Horovod (a raw
   ``hvd.allreduce`` in a session) and with TensorFlow's collective all-reduce (the op
   CollectiveAllReduceTrainer runs), for 2 and 3 nodes at 1 Gbit/s and at the fastest rate the
   machine sustains (unlimited links; their rate is a plain TCP stream's, measured first). Bus
   bandwidth is the ring's traffic per link, 2(N-1)/N x size, over the time of one all-reduce,
   as a fraction of the link rate. Goal >= 0.9 for Horovod at the largest size, 1 Gbit/s.
2. Horovod's knobs at 1 Gbit/s, 2 nodes: tensor fusion (32 tensors of 1 MB and 160 of 64 KB,
   fusion threshold 0 vs the default 128 MB), cycle time (1 vs 5 ms), fp16 compression (100 MB).
3. The example CIFAR ResNet under HorovodTrainer at the link rate against its compute-only step
   (the same N ranks at the same time, each alone, so the CPU share is the same) plus the
   transfer limit (gradient bytes x 2(N-1)/N / rate); fp16 compression; the overlap of the
   gradient exchange with back-propagation: (compute + exchange - step) / min(compute, exchange),
   with the exchange timed alone on the model's gradient shapes.

Usage: ``python benchmarks/network.py [--quick]`` (quick: 2 nodes, 1 Gbit/s, up to 10 MB, no
ResNet). Every namespace and process it starts is removed on any exit.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.netcluster import NetCluster  # noqa: E402

EXAMPLE_DIR = ROOT / "examples" / "resnet"
GOAL = 0.9
MB = 10**6  # sizes in MB and rates in Gbit/s are decimal, as tc's
LINK = "1gbit"
SLOW_LINK = "100mbit"
MASTER_PORT = 29400  # each node has its own network stack: no other job can hold it
DEFAULT_FUSION_MB, DEFAULT_CYCLE_MS = 128, 1  # Horovod's defaults (since 0.21)
BATCH, RESNET_STEPS = 32, 20  # ResNet batch per rank, steps per epoch (3 epochs)

ALLREDUCE = """
import json, os, statistics, sys, time
out, backend, plan = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
os.environ.update(plan["env"])
import tensorflow as tf
tfv1 = tf.compat.v1
tfv1.disable_eager_execution()

def tensors(case):
    n = int(case["mb"] * 1e6 / 4)
    return [tfv1.Variable(tf.ones([n]), name=f"{case['name']}_{k}") for k in range(case["count"])]

def touch(outputs):
    # One element of each result: TensorFlow prunes an all-reduce whose output nothing reads.
    return tf.add_n([tf.cast(o[0], tf.float32) for o in outputs])

if backend == "horovod":
    import horovod.tensorflow as hvd
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    def reduce_op(case):
        comp = hvd.Compression.fp16 if case.get("fp16") else hvd.Compression.none
        return touch([hvd.allreduce(v.value(), op=hvd.Sum, compression=comp) for v in tensors(case)])
    target, config = "", None
else:
    from towerpack.trainer.cluster import create_server, read_tf_config
    from towerpack.trainer.collective_group import CollectiveGroup
    from towerpack.trainer.collective_trainer import collective_configs, collective_place
    task = read_tf_config()
    rank, size, _ = collective_place(task)
    config, server_config = collective_configs(task, tfv1.ConfigProto(), None, False)
    server = create_server(task, server_config)
    target = server.target
    device = task.device + "/device:CPU:0"
    group = CollectiveGroup(size, rank, device, device, timeout_s=600)
    def reduce_op(case):
        with tf.device(device):
            return touch([group.reduce(v.value()) for v in tensors(case)])

ops = {case["name"]: reduce_op(case) for case in plan["cases"]}
results = {}
with tfv1.Session(target, config=config) as sess:
    sess.run(tfv1.global_variables_initializer())
    for case in plan["cases"]:
        op = ops[case["name"]]
        for _ in range(2):
            sess.run(op)
        times = []
        for _ in range(case["reps"]):
            t0 = time.perf_counter()
            sess.run(op)
            times.append(time.perf_counter() - t0)
        results[case["name"]] = statistics.median(times)
if rank == 0:
    with open(out, "w") as f:
        json.dump(results, f)
"""

RESNET = f"""
import json, os, statistics, sys, time
out, plan = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, {str(EXAMPLE_DIR)!r})
import numpy as np
from cifar_resnet import CifarResNet
from towerpack.trainer import Callback, HorovodTrainer, TensorInput, TrainConfig, launch_train_with_config
from towerpack.trainer.compat import tf, tfv1
STEPS, BATCH = plan["steps"], plan["batch"]

def constant_batch():
    rng = np.random.RandomState(0)
    return [tf.constant(rng.uniform(0, 255, (BATCH, 32, 32, 3)).astype(np.float32)),
            tf.constant(rng.randint(0, 10, BATCH).astype(np.int32))]

class Timer(Callback):
    # Epoch 1 warms up; the steps of epochs 2 and 3 are timed one by one (median).
    _chief_only = False
    def _setup_graph(self):
        self.times = []
    def _before_run(self, ctx):
        self.t0 = time.perf_counter()
    def _after_run(self, ctx, values):
        if self.epoch_num > 1:
            self.times.append(time.perf_counter() - self.t0)
    def _trigger_epoch(self):
        # Runs alone (no exchange) wait for each other here, so that they are timed together.
        if self.epoch_num == 1 and plan.get("barrier"):
            folder, n = plan["barrier"]
            open(os.path.join(folder, f"ready-{{os.getpid()}}"), "w").close()
            while len([f for f in os.listdir(folder) if f.startswith("ready-")]) < n:
                time.sleep(0.01)

from horovod.tensorflow import Compression
trainer = HorovodTrainer(compression=Compression.fp16 if plan["fp16"] else None)
timer = Timer()
config = TrainConfig(model=CifarResNet(plan["depth"], lr=0.01), data=TensorInput(constant_batch),
                     callbacks=[timer], monitors=[], extra_callbacks=[], steps_per_epoch=STEPS, max_epoch=3)
launch_train_with_config(config, trainer)
shapes = [v.shape.as_list() for v in tfv1.trainable_variables()]
result = {{"step": statistics.median(timer.times), "grad_bytes": 4 * sum(int(np.prod(s)) for s in shapes)}}
if trainer.size > 1:
    # The exchange alone: the same gradient shapes all-reduced as the trainer does, no compute.
    hvd = trainer.hvd
    with tf.Graph().as_default():
        grads = [tf.Variable(tf.ones(s), name=f"g{{k}}") for k, s in enumerate(shapes)]
        op = tf.add_n([tf.reshape(hvd.allreduce(g.value(), op=hvd.Average, compression=trainer.compression,
                                                name=f"alone{{k}}"), [-1])[0] for k, g in enumerate(grads)])
        with tfv1.Session() as sess:
            sess.run(tfv1.global_variables_initializer())
            for _ in range(3):
                sess.run(op)
            times = []
            for _ in range(2 * STEPS):
                t0 = time.perf_counter()
                sess.run(op)
                times.append(time.perf_counter() - t0)
    result["exchange"] = statistics.median(times)
if trainer.rank == 0:
    with open(out, "w") as f:
        json.dump(result, f)
"""


@dataclass
class Case:
    """One all-reduce measured in a job: ``count`` tensors of ``mb`` MB each, reduced together."""

    name: str
    mb: float
    count: int = 1
    reps: int = 5
    fp16: bool = False

    @property
    def bytes(self) -> float:
        return self.mb * self.count * MB


@dataclass
class Job:
    """One launch of N nodes: a script, its plan, and Horovod's environment for it."""

    nodes: int
    backend: str  # "horovod" or "tf-collective"
    cases: list[Case] = field(default_factory=list)
    env: dict = field(default_factory=dict)


def rate_bits(rate: str) -> float:
    """``"1gbit"`` -> 1e9 (tc's decimal units)."""
    units = {"gbit": 1e9, "mbit": 1e6, "kbit": 1e3}
    for suffix, scale in units.items():
        if rate.endswith(suffix):
            return float(rate[: -len(suffix)]) * scale
    raise ValueError(f"a rate like '1gbit' or '100mbit' was expected, got {rate!r}")


def ring_bytes(nodes: int, size: float) -> float:
    """Bytes a ring all-reduce of ``size`` bytes sends over each node's link."""
    return 2 * (nodes - 1) / nodes * size


def launch(net: NetCluster, nodes: int, backend: str, argv: list[str], folder: Path, timeout: float) -> None:
    """Run ``argv`` (a script and its arguments) with one rank on each of the first ``nodes``
    nodes, through ``launch`` in per-node mode; raise with the logs when a node fails."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TOWERPACK_LAUNCH_SECRET=secrets.token_hex(16))
    master = f"{net.nodes[0].addr}:{MASTER_PORT}"
    procs, logs = [], []
    for r in range(nodes):
        cmd = [sys.executable, "-m", "towerpack.launcher", "--nnodes", str(nodes), "--node-rank", str(r)]
        cmd += ["--master", master, "--network-interface", "eth0", "--np", "1"]
        cmd += ["--backend", backend, "--bars", "none", *argv]
        logs.append(folder / f"node{r}-{time.monotonic_ns()}.log")
        with logs[-1].open("w") as log:
            procs.append(net.popen(r, cmd, env=env, stdout=log, stderr=subprocess.STDOUT))
    _wait(procs, logs, timeout, f"{backend} job on {nodes} nodes")


def _wait(procs: list[subprocess.Popen], logs: list[Path], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{what} did not end within {timeout:.0f} s") from None
    failed = [f"node {r} exit code {p.returncode}:\n{logs[r].read_text()[-3000:]}"
              for r, p in enumerate(procs) if p.returncode != 0]  # fmt: skip
    if failed:
        raise RuntimeError(f"{what} failed:\n" + "\n".join(failed))


def run_allreduce(net: NetCluster, job: Job, folder: Path) -> dict[str, float]:
    """Seconds per all-reduce of each case of ``job`` (median over its repetitions, rank 0)."""
    out = folder / f"allreduce-{time.monotonic_ns()}.json"
    plan = {"env": job.env, "cases": [c.__dict__ for c in job.cases]}
    argv = [str(folder / "allreduce.py"), str(out), job.backend, json.dumps(plan)]
    launch(net, job.nodes, job.backend, argv, folder, timeout=600)
    return json.loads(out.read_text())


def tcp_rate(net: NetCluster, seconds: float = 3.0) -> float:
    """Bits/s of one TCP stream from node 0 to node 1 (payload only)."""
    server = (
        "import socket, sys, time\n"
        "s = socket.socket(); s.bind(('0.0.0.0', 5201)); s.listen(1); print('up', flush=True)\n"
        "c, _ = s.accept(); buf = bytearray(1 << 20); n = 0; t0 = None\n"
        "while True:\n"
        "    k = c.recv_into(buf)\n"
        "    if not k: break\n"
        "    t0 = t0 or time.perf_counter(); n += k\n"
        "print(n * 8 / (time.perf_counter() - t0))\n"
    )
    client = (
        "import socket, sys, time\n"
        "c = socket.create_connection((sys.argv[1], 5201)); data = bytes(1 << 20); t0 = time.perf_counter()\n"
        f"while time.perf_counter() - t0 < {seconds}: c.sendall(data)\n"
        "c.close()\n"
    )
    rx = net.popen(1, [sys.executable, "-c", server], stdout=subprocess.PIPE, text=True)
    assert rx.stdout.readline().strip() == "up"
    net.run(0, [sys.executable, "-c", client, net.nodes[1].addr], check=True, timeout=60)
    return float(rx.communicate(timeout=30)[0])


def result(case: str, ours: float, baseline: float, unit: str, goal: float | None = None) -> None:
    record = {"benchmark": "network", "case": case, "ours": round(ours, 4), "baseline": round(baseline, 4)}
    record.update(unit=unit, ratio=round(ours / baseline, 3), goal=goal)
    print("RESULT " + json.dumps(record), flush=True)


def bandwidth_cases(sizes: list[float]) -> list[Case]:
    return [Case(f"s{size:g}mb", size, reps=5 if size >= 100 else 10) for size in sizes]


def measure_bandwidth(net, nodes: int, rate: str, rate_bps: float, sizes: list[float], folder: Path) -> None:
    """Bus bandwidth of both backends at ``rate`` (``rate_bps`` bits/s) on ``nodes`` nodes."""
    net.set_rate(None, None if rate == "unlimited" else rate)
    for backend in ("horovod", "tf-collective"):
        cases = bandwidth_cases(sizes)
        times = run_allreduce(net, Job(nodes, backend, cases), folder)
        for case in cases:
            bus = ring_bytes(nodes, case.bytes) * 8 / times[case.name]
            largest = case.mb == max(sizes)
            goal = GOAL if backend == "horovod" and largest and rate == LINK else None
            label = f"{backend} {nodes} nodes {rate} {case.mb:g} MB"
            print(f"{label:<44}{times[case.name] * 1e3:>10.1f} ms{bus / 1e9:>9.3f} Gbit/s"
                  f"{bus / rate_bps:>8.3f} of link", flush=True)  # fmt: skip
            name = backend.replace("-", "_")
            result(f"{name}_{nodes}n_{rate}_{case.mb:g}mb_bus_bw", bus / 1e9, rate_bps / 1e9, "Gbit/s", goal)


def measure_knobs(net, folder: Path) -> None:
    """Fusion threshold, cycle time and fp16 compression at 1 Gbit/s on 2 nodes (Horovod)."""
    net.set_rate(None, LINK)
    many = [Case("many1mb", 1, count=32, reps=5), Case("many64kb", 0.064, count=160, reps=10)]
    times = {}
    for fusion, cycle in (
        (0, DEFAULT_CYCLE_MS),
        (DEFAULT_FUSION_MB, DEFAULT_CYCLE_MS),
        (DEFAULT_FUSION_MB, 5),
    ):
        env = {"HOROVOD_FUSION_THRESHOLD": str(fusion * 2**20), "HOROVOD_CYCLE_TIME": str(cycle)}
        times[fusion, cycle] = run_allreduce(net, Job(2, "horovod", many, env), folder)
    limit = {c.name: ring_bytes(2, c.bytes) * 8 / rate_bits(LINK) for c in many}
    for c in many:
        off, on = times[0, DEFAULT_CYCLE_MS][c.name], times[DEFAULT_FUSION_MB, DEFAULT_CYCLE_MS][c.name]
        slow_cycle = times[DEFAULT_FUSION_MB, 5][c.name]
        print(f"{c.count} x {c.mb:g} MB: fusion off {off * 1e3:.1f} ms, fusion {DEFAULT_FUSION_MB} MB "
              f"{on * 1e3:.1f} ms, cycle 5 ms {slow_cycle * 1e3:.1f} ms, "
              f"link limit {limit[c.name] * 1e3:.1f} ms", flush=True)  # fmt: skip
        # Lower is better: the ratios are the speed-ups of the default setting.
        result(f"horovod_fusion_off_vs_on_{c.name}", off, on, "s")
        result(f"horovod_cycle_5ms_vs_1ms_{c.name}", slow_cycle, on, "s")
    pair = [Case("fp32", 100, reps=5), Case("fp16", 100, reps=5, fp16=True)]
    t = run_allreduce(net, Job(2, "horovod", pair), folder)
    print(f"100 MB: fp32 {t['fp32'] * 1e3:.1f} ms, fp16 compression {t['fp16'] * 1e3:.1f} ms", flush=True)
    result("horovod_fp16_vs_fp32_100mb", t["fp16"], t["fp32"], "s")


def run_resnet(net, nodes: int, fp16: bool, folder: Path, depth: int, steps: int) -> dict:
    out = folder / f"resnet-{time.monotonic_ns()}.json"
    plan = {"steps": steps, "batch": BATCH, "depth": depth, "fp16": fp16}
    launch(
        net, nodes, "horovod", [str(folder / "resnet.py"), str(out), json.dumps(plan)], folder, timeout=900
    )
    return json.loads(out.read_text())


def compute_only(net, nodes: int, folder: Path, depth: int, steps: int) -> float:
    """Step seconds of the model alone (1 rank, no exchange) while ``nodes`` such runs share the CPUs."""
    barrier = folder / f"barrier-{time.monotonic_ns()}"
    barrier.mkdir()
    plan = json.dumps(
        {"steps": steps, "batch": BATCH, "depth": depth, "fp16": False, "barrier": [str(barrier), nodes]}
    )
    outs = [folder / f"alone-{time.monotonic_ns()}-{r}.json" for r in range(nodes)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    procs, logs = [], []
    for r in range(nodes):
        cmd = [sys.executable, "-m", "towerpack.launcher", "--np", "1", "--backend", "horovod"]
        cmd += ["--bars", "none", str(folder / "resnet.py"), str(outs[r]), plan]
        logs.append(folder / f"alone{r}-{time.monotonic_ns()}.log")
        with logs[-1].open("w") as log:
            procs.append(net.popen(r, cmd, env=env, stdout=log, stderr=subprocess.STDOUT))
    _wait(procs, logs, 900, "compute-only runs")
    return sum(json.loads(o.read_text())["step"] for o in outs) / nodes


def measure_resnet(
    net, nodes: int, rate: str, folder: Path, depth: int, steps: int, fp16: bool, compute: float
) -> None:
    """ResNet steps under HorovodTrainer at ``rate`` against ``compute`` (the compute-only step)."""
    net.set_rate(None, rate)
    runs = {False: run_resnet(net, nodes, False, folder, depth, steps)}
    if fp16:
        runs[True] = run_resnet(net, nodes, True, folder, depth, steps)
    plain = runs[False]
    transfer = ring_bytes(nodes, plain["grad_bytes"]) * 8 / rate_bits(rate)
    exchange = plain["exchange"]
    overlap = (compute + exchange - plain["step"]) / min(compute, exchange)
    name = f"ResNet-{6 * depth + 2} {nodes} nodes {rate}"
    print(f"{name}: step {plain['step'] * 1e3:.1f} ms; compute only {compute * 1e3:.1f} ms + transfer limit "
          f"{transfer * 1e3:.1f} ms ({plain['grad_bytes'] / MB:.2f} MB of gradients); exchange alone "
          f"{exchange * 1e3:.1f} ms; overlap {overlap:.2f}", flush=True)  # fmt: skip
    key = f"resnet{6 * depth + 2}_{nodes}n_{rate}"
    # Lower is better: step time against the no-overlap limit of compute plus the ideal transfer.
    result(f"{key}_step_vs_compute_plus_transfer", plain["step"], compute + transfer, "s")
    result(f"{key}_step_vs_compute_plus_exchange", plain["step"], compute + exchange, "s")
    if fp16:
        print(f"{name}: fp16 compression step {runs[True]['step'] * 1e3:.1f} ms", flush=True)
        result(f"{key}_fp16_vs_fp32_step", runs[True]["step"], plain["step"], "s")


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)  # so that the cluster's context manager removes what it made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 nodes, 1 Gbit/s, up to 10 MB, no ResNet")
    parser.add_argument("--depth", type=int, default=3, help="ResNet blocks per stage (6n+2 layers)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("network.py needs root (it makes network namespaces)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "allreduce.py").write_text(ALLREDUCE)
        (folder / "resnet.py").write_text(RESNET)
        if args.quick:
            with NetCluster(2, rate=LINK) as net:
                measure_bandwidth(net, 2, LINK, rate_bits(LINK), [1, 10], folder)
            return 0
        with NetCluster(3) as net:
            fastest = tcp_rate(net)
            print(f"one TCP stream over an unlimited link: {fastest / 1e9:.2f} Gbit/s", flush=True)
            for nodes in (2, 3):
                measure_bandwidth(net, nodes, LINK, rate_bits(LINK), [1, 10, 100], folder)
                measure_bandwidth(net, nodes, "unlimited", fastest, [1, 10, 100], folder)
            measure_knobs(net, folder)
            compute = {n: compute_only(net, n, folder, args.depth, RESNET_STEPS) for n in (2, 3)}
            for nodes in (2, 3):
                measure_resnet(net, nodes, LINK, folder, args.depth, RESNET_STEPS, nodes == 2, compute[nodes])
            # A link 10x slower makes the exchange about as long as the compute: what overlap can hide.
            measure_resnet(net, 2, SLOW_LINK, folder, args.depth, RESNET_STEPS, False, compute[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
