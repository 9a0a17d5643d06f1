"""Find and end every process of a job by the tag variable each of them inherits.

Ranks run in their own sessions, and their children may call ``setsid`` or double-fork, so process
groups and parent links are not enough; the environment tag follows every descendant.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable

import psutil

#: Environment variable carrying the job's tag; every process the launcher starts inherits it.
TAG_VAR = "TOWERPACK_LAUNCH_TAG"


def tagged(tag: str, prefix: bool = False) -> list[psutil.Process]:
    """Live (non-zombie) processes, other than this one, whose ``TAG_VAR`` is ``tag`` (or starts with it)."""
    me = os.getpid()
    found = []
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            value = proc.environ().get(TAG_VAR)
            if value is None or not (value.startswith(tag) if prefix else value == tag):
                continue
            if proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def _signal_all(procs: list[psutil.Process], sig: int) -> None:
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(sig)  # psutil refuses a pid that now belongs to another process


def terminate(
    tag: str,
    grace: float = 3.0,
    prefix: bool = False,
    signal_groups: Callable[[int], None] | None = None,
    hurry: threading.Event | None = None,
) -> None:
    """SIGTERM the processes of ``tag``; SIGKILL what is left after ``grace`` (or once ``hurry`` is set).

    ``signal_groups(sig)``, when given, is called with each signal too, for the caller to signal the
    process groups it still owns.
    """
    signal_groups = signal_groups or (lambda sig: None)
    _signal_all(tagged(tag, prefix), signal.SIGTERM)
    signal_groups(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not (hurry and hurry.is_set()):
        if not tagged(tag, prefix):
            break
        time.sleep(0.05)
    # Killing the groups even when the scan came back empty catches members that cleared their environment.
    _signal_all(tagged(tag, prefix), signal.SIGKILL)
    signal_groups(signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while tagged(tag, prefix) and time.monotonic() < deadline:
        time.sleep(0.05)
