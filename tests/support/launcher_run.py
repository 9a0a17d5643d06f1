"""Run the real `launch` command in tests and check that no process of the job is left behind."""

from __future__ import annotations

import contextlib
import os
import signal
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


def start_launch(
    *args: str, cwd=None, env: dict | None = None, new_session: bool = False
) -> subprocess.Popen:
    full_env = dict(os.environ, **(env or {}))
    return subprocess.Popen(
        [*LAUNCH, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=full_env,
        start_new_session=new_session,
    )


def finish(*procs: subprocess.Popen, timeout: float = 90) -> list[tuple[int, str, str]]:
    """``(returncode, stdout, stderr)`` of each process, killed if it outlives ``timeout``."""
    results = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            proc.kill()
            proc.wait()
        results.append((proc.returncode, out, err))
    return results


def signal_when(
    ready, *args: str, sig: int = signal.SIGUSR1, cwd=None, env: dict | None = None, wait: float = 120
) -> tuple[int, str, str]:
    """Start ``launch ARGS``, send it ``sig`` once ``ready()`` is true (or it ended), and finish it:
    ``(returncode, stdout, stderr)``; it is killed if it outlives a minute after the signal."""
    launcher = start_launch(*args, cwd=cwd, env=env)
    try:
        wait_for(lambda: ready() or launcher.poll() is not None, wait, what="the job to get ready")
        launcher.send_signal(sig)
        ((code, out, err),) = finish(launcher, timeout=60)
    finally:
        launcher.kill()
        launcher.wait()
    return code, out, err


def process_tree(pid: int) -> list[psutil.Process]:
    """``pid`` and all its descendants (a node launcher: its watchdog, its ranks and their children)."""
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def process_groups(pid: int) -> set[int]:
    """The process groups of ``pid``'s tree (each rank of a launcher has a group of its own)."""
    groups = set()
    for proc in process_tree(pid):
        try:
            groups.add(os.getpgid(proc.pid))
        except ProcessLookupError:
            continue
    return groups


def freeze(pid: int) -> set[int]:
    """Stop (SIGSTOP) every process group of a node launcher's tree: a host that froze or lost power,
    as its peers see it. Returns the groups, for ``thaw``."""
    groups = process_groups(pid)
    for group in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGSTOP)
    return groups


def thaw(groups: set[int]) -> None:
    for group in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGCONT)


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
        files = [f for f in folder.glob("ready.*") if not f.name.endswith(".tmp")]
        if len(files) < count:
            return None
        try:
            return {f.name.split(".", 1)[1]: int(f.read_text()) for f in files}
        except (ValueError, FileNotFoundError):  # a file still being written
            return None

    return wait_for(ready, timeout, what=f"{count} ranks to start")
