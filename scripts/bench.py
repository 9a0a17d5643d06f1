#!/usr/bin/env python
"""Run every benchmark in benchmarks/ and print one table of their results (``make bench``).

    python scripts/bench.py [--quick] [--only NAME ...] [--timeout S]

Each benchmark prints, besides its own table, one line per measured case:
``RESULT {"benchmark", "case", "ours", "baseline", "unit", "ratio", "goal"}`` (JSON on one line).
``--quick`` passes ``--quick`` to the benchmarks. The exit code is 1 if a benchmark failed or
printed no RESULT line; a missed goal is only flagged in the table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent.parent / "benchmarks"
PREFIX = "RESULT "
KEYS = ("benchmark", "case", "ours", "baseline", "unit", "ratio", "goal")
LOWER_IS_BETTER = {"s", "% of a core", "MB"}


def parse_results(output: str) -> list[dict]:
    """The RESULT records of a benchmark's output; a malformed one raises ValueError."""
    results = []
    for line in output.splitlines():
        if line.startswith(PREFIX):
            record = json.loads(line[len(PREFIX) :])
            missing = [k for k in KEYS if k not in record]
            if missing:
                raise ValueError(f"RESULT line lacks {missing}: {line}")
            goal = record["goal"]
            if goal is not None and (isinstance(goal, bool) or not isinstance(goal, (int, float))):
                raise ValueError(f"RESULT goal must be a number or null: {line}")
            results.append(record)
    return results


def stop_group(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGTERM the benchmark's process group, SIGKILL it after ``grace`` seconds, and reap it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.communicate(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def run_benchmark(script: Path, quick: bool, timeout: float) -> tuple[list[dict], str | None]:
    """``(results, error)`` of one benchmark run."""
    cmd = [sys.executable, str(script), *(["--quick"] if quick else [])]
    # Its own process group, so that a timeout also ends the processes the benchmark started.
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        return [], f"timed out after {timeout:.0f} s"
    sys.stdout.write(stdout)
    if proc.returncode != 0:
        return [], f"exit code {proc.returncode}: {stderr.strip()[-500:]}"
    try:
        results = parse_results(stdout)
    except ValueError as e:
        return [], str(e)
    return results, None if results else "printed no RESULT line"


def format_table(results: list[dict]) -> str:
    header = ("benchmark", "case", "ours", "baseline", "unit", "ratio", "goal", "")
    rows = [header]
    for r in results:
        goal = r["goal"]
        # Ratios of times, CPU shares and memory are better low; all others are better high.
        lower_better = r["unit"] in LOWER_IS_BETTER
        missed = goal is not None and (r["ratio"] > goal if lower_better else r["ratio"] < goal)
        rows.append(
            (
                r["benchmark"],
                r["case"],
                f"{r['ours']:g}",
                f"{r['baseline']:g}",
                r["unit"],
                f"{r['ratio']:.3f}",
                "-" if goal is None else f"{goal:g}",
                "MISSED" if missed else "",
            )
        )
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="run the benchmarks' quick modes")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="benchmark script stems to run")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per benchmark (1200)")
    args = parser.parse_args(argv)
    scripts = sorted(BENCH_DIR.glob("*.py"))
    if args.only:
        unknown = set(args.only) - {s.stem for s in scripts}
        if unknown:
            parser.error(f"no benchmark named {', '.join(sorted(unknown))} in {BENCH_DIR.name}/")
        scripts = [s for s in scripts if s.stem in args.only]

    all_results, failures = [], []
    start = time.monotonic()
    for script in scripts:
        print(f"==> {script.name}{' --quick' if args.quick else ''}", flush=True)
        results, error = run_benchmark(script, args.quick, args.timeout)
        all_results += results
        if error:
            failures.append(f"{script.name}: {error}")
    print(f"\n{len(scripts)} benchmarks in {time.monotonic() - start:.0f} s\n")
    print(format_table(all_results))
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
