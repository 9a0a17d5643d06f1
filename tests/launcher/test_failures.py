"""Supervision: the first failure stops every process within seconds, with a summary and the right code."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from support.launcher_run import assert_job_gone, job_processes, launch, rank_script, start_launch, wait_ready

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(60)]
BEHAVE = rank_script("behave.py")


def _summary_names(stderr: str, rank: int, what: str) -> None:
    head = [line for line in stderr.splitlines() if "failed first" in line]
    assert len(head) == 1, stderr
    assert f"rank {rank} on host " in head[0] and what in head[0], stderr
    assert f"rank {rank} is failing on purpose" in stderr.split("failed first", 1)[1]


def test_failing_rank_stops_the_others(tmp_path):
    start = time.monotonic()
    proc = launch("--np", "3", "--backend", "none", BEHAVE, str(tmp_path), "exit3@1", "sleep")
    assert proc.returncode == 3, proc.stderr
    assert time.monotonic() - start < 30  # the sleeping ranks (600 s) were stopped
    _summary_names(proc.stderr, 1, "exit code 3")
    assert "stopped the other 2 process(es)" in proc.stderr


def test_kill_9_of_one_rank(tmp_path):
    launcher = start_launch("--np", "3", "--backend", "none", BEHAVE, str(tmp_path), "sleep")
    try:
        pids = wait_ready(tmp_path, 3)
        os.kill(pids["2"], signal.SIGKILL)
        killed = time.monotonic()
        _, err = launcher.communicate(timeout=30)
        assert_job_gone(timeout=5.0)
        assert time.monotonic() - killed < 5.0  # the bound: every process gone within 5 s
        assert launcher.returncode == 128 + signal.SIGKILL, err
        assert "rank 2 on host" in err and "killed by SIGKILL" in err
        assert not any(
            psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids.values()
        )
    finally:
        launcher.kill()
        launcher.wait()


def _stopped_within(folder, rank: str, bound: float) -> None:
    """The job ended (the launcher returned, every process gone) within ``bound`` s of ``rank``'s failure."""
    failed_at = float((folder / f"failed.{rank}").read_text())
    assert time.time() - failed_at < bound


def test_hanging_rank_is_killed_when_another_fails(tmp_path):
    # Rank 0 ignores SIGTERM (set before it announces itself; rank 1 waits for that): SIGKILL after the grace.
    proc = launch("--np", "2", "--backend", "none", BEHAVE, str(tmp_path), "hang@0", "exit4@1")
    assert proc.returncode == 4, proc.stderr
    _summary_names(proc.stderr, 1, "exit code 4")
    _stopped_within(tmp_path, "1", 5.0)  # the bound, SIGTERM grace (3 s) included


def test_grandchildren_in_their_own_session_are_stopped(tmp_path):
    # Rank 1 fails only once rank 0 has started its setsid grandchild.
    proc = launch("--np", "2", "--backend", "none", BEHAVE, str(tmp_path), "child@0", "exit5@1")
    assert proc.returncode == 5, proc.stderr  # launch() also checks that the setsid grandchild is gone
    _stopped_within(tmp_path, "1", 5.0)


def test_first_failure_is_named_even_when_it_is_reported_late(tmp_path):
    # Rank 1 fails first, but a grandchild keeps its output open, so its exit is reported after rank 0's,
    # which fails because rank 1 did.
    proc = launch("--np", "2", "--backend", "none", BEHAVE, str(tmp_path), "holdexit11@1", "follow12@0")
    assert proc.returncode == 11, proc.stderr
    _summary_names(proc.stderr, 1, "exit code 11")


def test_sigkill_of_launcher_takes_the_ranks_down(tmp_path):
    launcher = start_launch("--np", "2", "--backend", "none", BEHAVE, str(tmp_path), "child@0", "hang@1")
    try:
        wait_ready(tmp_path, 2)
        assert len(job_processes(exclude=(launcher.pid,))) >= 4  # 2 ranks, a grandchild, the watchdog
        launcher.kill()
        launcher.wait()
        # The watchdog: SIGTERM, 3 s grace for the rank that ignores it, then SIGKILL.
        assert_job_gone(timeout=8.0)
    finally:
        launcher.kill()
        launcher.wait()


def test_successful_job_with_parameter_server_that_never_ends(tmp_path):
    # Workers finish; the ps "hangs" as a real one would in server.join(). The launcher stops it: exit 0.
    proc = launch("--np", "2", "--backend", "tf-server", "--ps", "1", BEHAVE, str(tmp_path), "hang@ps0", "ok")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(" done\n") == 2
