"""One node's process group and the launcher's signal handling, tested in this process."""

from __future__ import annotations

import os
import sys

import pytest

from support.launcher_run import rank_script, wait_ready
from support.procs import run_python, wait_for
from towerpack.launcher.group import LocalGroup
from towerpack.launcher.output import OutputOptions
from towerpack.launcher.tasks import StopRequest, Task, TaskId

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(60)]


def test_stop_signals_only_the_groups_of_ranks_not_yet_reaped(tmp_path, monkeypatch):
    # A reaped rank's pid (its process group id) may belong to an unrelated process by now.
    exits = []
    argv = [sys.executable, rank_script("behave.py"), str(tmp_path), "ok@0", "sleep@1"]
    group = LocalGroup("here", argv, "group-test", OutputOptions(ranks=frozenset()), exits.append)
    group.start([Task(TaskId.worker(r), {"RANK": str(r), "WORLD_SIZE": "2"}) for r in (0, 1)], attempt=0)
    try:
        pids = wait_ready(tmp_path, 2, timeout=30)
        wait_for(lambda: exits, 30, what="rank 0 to end")
        assert (exits[0].task, exits[0].code) == (TaskId.worker(0), 0)
        signalled, killpg = [], os.killpg
        monkeypatch.setattr(os, "killpg", lambda pgid, sig: (signalled.append(pgid), killpg(pgid, sig)))
    finally:
        group.stop(StopRequest(None, 2.0))
    assert pids["1"] in signalled
    assert pids["0"] not in signalled


FLOOD = """
import os, signal, sys, threading, time
from towerpack.launcher.cli import parse
from towerpack.launcher.coordinator import Coordinator
from towerpack.launcher.signals import as_events

events = Coordinator(parse(["--np", "1", "--backend", "none", sys.argv[1]])).events
end = time.monotonic() + 1.0

def flood():
    while time.monotonic() < end:
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.0005)

with as_events(events):
    threading.Thread(target=flood, daemon=True).start()
    while time.monotonic() < end:  # what the supervising loop does, as fast as it can
        events.put(None)
        events.get()
print("survived")
"""


def test_signals_arriving_while_the_event_queue_is_busy():
    # A handler that blocks on a lock its own thread holds (queue.Queue's) deadlocks the launcher.
    proc = run_python(FLOOD, rank_script("report.py"), timeout=30, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "survived", proc.stderr[-2000:]
