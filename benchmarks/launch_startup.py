"""Start-up overhead: wall time from starting the launcher to both ranks past ``hvd.init()``.

Compares ``launch --np 2`` with ``horovodrun --gloo -np 2 -H localhost:2`` on the same rank script, in
alternating runs, and prints the medians and their ratio.
Usage: ``python benchmarks/launch_startup.py [-n 5]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RANK = """
import os, sys, time
import horovod.tensorflow as hvd
hvd.init()
with open(os.path.join(sys.argv[1], f"init.{hvd.rank()}"), "w") as f:
    f.write(repr(time.time()))
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
    print(f"{'launcher':<26}{'to hvd.init()':>15}{'to exit':>10}")
    medians = {}
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
            print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
