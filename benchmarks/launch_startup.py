"""The launcher's own times: start-up, a frozen node, and pre-emption.

1. Start-up overhead: wall time from starting the launcher to both ranks past ``hvd.init()``,
   ``launch --np 2`` against ``horovodrun --gloo -np 2 -H localhost:2`` on the same rank script, in
   alternating runs (medians and their ratio).
2. A frozen node: two node launchers on loopback run a HorovodTrainer job (one rank each); every
   process group of node 1 is stopped with SIGSTOP; the time until node 0's launcher has ended the
   job, against the heartbeat timeout (the part no launcher can skip). Goal: at most 1.5 times it
   (15 s with the default 10 s).
3. Pre-emption: SIGUSR1 to the launcher of a 2-rank HorovodTrainer job; the time until the chief's
   checkpoint is written, against one step plus one regular ModelSaver save measured in the same job.

Usage: ``python benchmarks/launch_startup.py [-n 5] [--quick]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

RANK = """
import os, sys, time
import horovod.tensorflow as hvd
hvd.init()
with open(os.path.join(sys.argv[1], f"init.{hvd.rank()}"), "w") as f:
    f.write(repr(time.time()))
"""


TRAIN = """
import os, sys, time
import numpy as np
from towerpack.trainer import Callback, HorovodTrainer, ModelDesc, ModelSaver, TrainConfig, logger
from towerpack.trainer import launch_train_with_config
from towerpack.trainer.compat import tf, tfv1

out = sys.argv[1]
trainer = HorovodTrainer()
if trainer.rank == 0:
    logger.set_logger_dir(os.path.join(out, "log"), action="d")


class Model(ModelDesc):
    def inputs(self):
        return [tf.TensorSpec([None, 512], tf.float32, "x")]

    def build_graph(self, x):
        w = tfv1.get_variable("w", [512, 512])  # 1 MB of weights (3 MB with the optimizer's slots)
        return tf.reduce_mean(tf.square(tf.matmul(x, w)), name="cost")

    def optimizer(self):
        return tfv1.train.AdamOptimizer(1e-3)


class Batches:
    def reset_state(self):
        pass

    def __len__(self):
        return 20

    def __iter__(self):
        while True:
            yield [np.random.rand(64, 512).astype(np.float32)]


class TimedSaver(ModelSaver):
    def save(self):
        start = time.perf_counter()
        prefix = super().save()
        with open(os.path.join(out, "saves"), "a") as f:
            f.write(f"{time.perf_counter() - start}\\n")
        return prefix


class Steps(Callback):
    _chief_only = False

    def _before_run(self, ctx):
        self.start = time.perf_counter()

    def _after_run(self, ctx, values):
        if trainer.rank == 0:
            with open(os.path.join(out, "steps"), "a") as f:
                f.write(f"{time.perf_counter() - self.start}\\n")

    def _trigger_step(self):
        if trainer.rank == 0 and self.global_step == 45:
            open(os.path.join(out, "ready"), "w").close()


config = TrainConfig(model=Model(), dataflow=Batches(), callbacks=[TimedSaver(), Steps()], max_epoch=100000)
launch_train_with_config(config, trainer)
"""


def one_run(cmd: list[str], out: Path, env: dict) -> tuple[float, float]:
    """(seconds until both ranks passed hvd.init(), seconds until the launcher exited)."""
    for old in out.glob("init.*"):
        old.unlink()
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    done = time.time()
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({proc.returncode}): {proc.stderr[-1500:]}")
    marks = [float((out / f"init.{r}").read_text()) for r in range(2)]
    return max(marks) - start, done - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--repeat", type=int, default=5, help="runs of each launcher (default 5)")
    parser.add_argument("--quick", action="store_true", help="2 runs of each launcher")
    args = parser.parse_args()
    if args.quick:
        args.repeat = min(args.repeat, 2)
    bindir = Path(sys.executable).parent
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}")
    horovodrun = shutil.which("horovodrun", path=env["PATH"])
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        script = out / "rank.py"
        script.write_text(RANK)
        ours = [sys.executable, "-m", "towerpack.launcher", "--np", "2", str(script), tmp]
        launchers = {"launch --np 2": ours}
        if horovodrun:
            launchers["horovodrun --gloo -np 2"] = [
                horovodrun, "--gloo", "-np", "2", "-H", "localhost:2", sys.executable, str(script), tmp,
            ]  # fmt: skip
        else:
            print("horovodrun not found: measuring launch alone")
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in launchers}
        one_run(launchers["launch --np 2"], out, env)  # warm the file cache for both
        for _ in range(args.repeat):
            for name, cmd in launchers.items():
                times[name].append(one_run(cmd, out, env))

    print(f"\nmedian of {args.repeat} runs, 2 ranks on {os.cpu_count()} cores (seconds)")
    results = startup_table(times)
    results.append(frozen_node(env))
    results.append(preemption(env))
    for result in results:
        print("RESULT " + json.dumps(result))
    return 0


def startup_table(times: dict) -> list[dict]:
    print(f"{'launcher':<26}{'to hvd.init()':>15}{'to exit':>10}")
    medians, results = {}, []
    for name, runs in times.items():
        medians[name] = (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
        print(f"{name:<26}{medians[name][0]:>15.2f}{medians[name][1]:>10.2f}")
    if len(medians) == 2:
        ours, theirs = medians.values()
        print(f"{'ratio launch/horovodrun':<26}{ours[0] / theirs[0]:>15.2f}{ours[1] / theirs[1]:>10.2f}")
        for i, case in enumerate(("to hvd.init()", "to exit")):
            result = {"benchmark": "launch_startup", "case": case, "ours": round(ours[i], 3)}
            result.update(
                baseline=round(theirs[i], 3), unit="s", ratio=round(ours[i] / theirs[i], 3), goal=None
            )
            results.append(result)
    return results


def _wait_file(path: Path, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the job ended or stalled before {path.name}: {proc.stderr.read()[-2000:]}")
        time.sleep(0.02)


def _groups(pid: int) -> set[int]:
    root = psutil.Process(pid)
    return {os.getpgid(p.pid) for p in [root, *root.children(recursive=True)]}


def frozen_node(env: dict) -> dict:
    """Seconds from freezing node 1 (SIGSTOP of every process group of its launcher's tree) until
    node 0's launcher has ended the job."""
    timeout = 10.0
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        (out / "train.py").write_text(TRAIN)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        node_env = dict(env, TOWERPACK_LAUNCH_SECRET="benchmark-frozen-node")
        common = ["--nnodes", "2", "--master", f"127.0.0.1:{port}", "--np", "1"]
        launch = [sys.executable, "-m", "towerpack.launcher", *common]
        extras = (
            ["--node-rank", "0", "--backend", "horovod"],
            ["--node-rank", "1", "--node-addr", "127.0.0.2"],
        )
        nodes = [
            subprocess.Popen(
                [*launch, *extra, str(out / "train.py"), tmp],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env=node_env,
                start_new_session=True,
            )
            for extra in extras
        ]
        groups: set[int] = set()
        try:
            _wait_file(out / "ready", nodes[0])
            groups = _groups(nodes[1].pid)
            for group in groups:
                os.killpg(group, signal.SIGSTOP)
            start = time.monotonic()
            nodes[0].wait(120)
            ended = time.monotonic() - start
        finally:
            for group in groups:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signal.SIGCONT)
            for node in nodes:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    node.wait(30)
                node.kill()
                node.wait()
    print(f"\na frozen node ended the job after {ended:.2f} s (heartbeat timeout {timeout:g} s)")
    return {
        "benchmark": "launch_startup", "case": "frozen node to job end", "ours": round(ended, 3),
        "baseline": timeout, "unit": "s", "ratio": round(ended / timeout, 3), "goal": 1.5,
    }  # fmt: skip


def preemption(env: dict) -> dict:
    """Seconds from SIGUSR1 to the launcher until the chief's checkpoint is written."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        (out / "train.py").write_text(TRAIN)
        cmd = [sys.executable, "-m", "towerpack.launcher", "--np", "2", "--backend", "horovod"]
        proc = subprocess.Popen(
            [*cmd, str(out / "train.py"), tmp],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            _wait_file(out / "ready", proc)
            pointer = out / "log" / "checkpoint"
            before = pointer.stat().st_mtime_ns if pointer.exists() else 0
            start = time.monotonic()
            proc.send_signal(signal.SIGUSR1)
            while not pointer.exists() or pointer.stat().st_mtime_ns == before:
                if time.monotonic() - start > 60:
                    raise RuntimeError("no checkpoint within 60 s of SIGUSR1")
                time.sleep(0.005)
            saved = time.monotonic() - start
            proc.wait(60)
        finally:
            proc.kill()
            proc.wait()
        step = statistics.median(float(x) for x in (out / "steps").read_text().split()[5:])
        save = statistics.median(float(x) for x in (out / "saves").read_text().split())
    print(f"SIGUSR1 to checkpoint: {saved:.3f} s (a step {step:.3f} s, a save {save:.3f} s)")
    baseline = step + save
    return {
        "benchmark": "launch_startup", "case": "SIGUSR1 to checkpoint", "ours": round(saved, 3),
        "baseline": round(baseline, 3), "unit": "s", "ratio": round(saved / baseline, 3), "goal": None,
    }  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
