"""Process helpers for tests: run Python in a real subprocess, find the processes a test left."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time

import psutil

#: Environment variable every test sets to its own id; every process it starts inherits it.
TAG_VAR = "TOWERPACK_TEST_TAG"


def tagged_processes(tag: str) -> list[psutil.Process]:
    """Processes (other than this one) whose environment carries ``TAG_VAR=tag``.

    This finds children, grandchildren and double-forked daemons re-parented to init alike.
    """
    me = os.getpid()
    found = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me:
            continue
        try:
            if proc.environ().get(TAG_VAR) == tag and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return found


def describe(procs: list[psutil.Process]) -> str:
    lines = []
    for p in procs:
        try:
            lines.append(f"  pid {p.pid}: {' '.join(p.cmdline())[:200]}")
        except psutil.Error:
            lines.append(f"  pid {p.pid}: (gone)")
    return "\n".join(lines)


def kill_all(procs: list[psutil.Process]) -> None:
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(procs, timeout=5)


def wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait up to ``timeout`` seconds for ``procs`` to exit; return those still alive."""
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    return [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def run_python(
    code: str, *args: str, timeout: float = 60, env: dict | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    """Run ``python -c code`` in a fresh interpreter, with a hard timeout."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout, env=full_env
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float, interval: float = 0.05, what: str = "condition"):
    """Poll ``predicate`` until it returns a truthy value; raise after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def terminate_tree(pid: int, sig: int = signal.SIGTERM, grace: float = 3.0) -> None:
    """Send ``sig`` to a process and its descendants, SIGKILL whatever remains after ``grace``."""
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    procs = [root, *root.children(recursive=True)]
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.send_signal(sig)
    kill_all(wait_gone(procs, grace))
