"""Run the real `launch` command in tests and check that no process of the job is left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from support.procs import TAG_VAR, describe, tagged_processes, wait_for

RANKS = Path(__file__).resolve().parent.parent / "launcher" / "ranks"
LAUNCH = [sys.executable, "-m", "towerpack.launcher"]


def rank_script(name: str) -> str:
    return str(RANKS / name)


def launch(*args: str, timeout: float = 90, cwd=None, env: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``launch ARGS`` to completion; the job's processes must all be gone when it returns."""
    full_env = dict(os.environ, **(env or {}))
    proc = subprocess.run(
        [*LAUNCH, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=full_env
    )
    assert_job_gone(timeout=1.0)
    return proc


def start_launch(*args: str, cwd=None, env: dict | None = None) -> subprocess.Popen:
    full_env = dict(os.environ, **(env or {}))
    return subprocess.Popen(
        [*LAUNCH, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=full_env
    )


def job_processes(exclude: tuple[int, ...] = ()) -> list[psutil.Process]:
    """Every live process started during the current test (the test tag is inherited by all of them)."""
    return [p for p in tagged_processes(os.environ[TAG_VAR]) if p.pid not in exclude]


def assert_job_gone(timeout: float = 5.0, exclude: tuple[int, ...] = ()) -> float:
    """Wait until no process of the test is alive; return how long that took."""
    start = time.monotonic()
    deadline = start + timeout
    while True:
        left = job_processes(exclude)
        if not left:
            return time.monotonic() - start
        if time.monotonic() > deadline:
            raise AssertionError(f"processes still alive {timeout}s later:\n{describe(left)}")
        time.sleep(0.05)


def wait_ready(folder: Path, count: int, timeout: float = 60) -> dict[str, int]:
    """Wait for ``count`` rank scripts to write ``ready.<rank>`` (holding their pid); return rank -> pid."""

    def ready():
        files = list(folder.glob("ready.*"))
        if len(files) < count:
            return None
        try:
            return {f.name.split(".", 1)[1]: int(f.read_text()) for f in files}
        except ValueError:  # a file still being written
            return None

    return wait_for(ready, timeout, what=f"{count} ranks to start")
