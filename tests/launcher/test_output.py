"""Output for humans: progress bars (carriage returns) drawn live on a terminal, one rank's at a time by
default, whole lines from other ranks above them; only final states off a terminal; the error file."""

from __future__ import annotations

import json
import socket

import pytest

from support.launcher_run import assert_job_gone, launch, rank_script
from support.launcher_terminal import Terminal

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(60)]
BARS, BEHAVE = rank_script("bars.py"), rank_script("behave.py")
HOST = socket.gethostname().split(".")[0]


@pytest.mark.parametrize("bars", ["one", "all"])
def test_bars_are_live_on_a_terminal_and_lines_from_other_ranks_stay_whole(tmp_path, bars):
    term = Terminal("--np", "2", "--backend", "none", "--bars", bars, BARS, str(tmp_path))
    try:
        # Rank 0's bar shows before rank 0 ends its line.
        term.wait_screen([f"[{HOST}:0] bar 1/3"])
        (tmp_path / "go1").touch()
        # Rank 0's bar moves on; rank 1 draws a bar and prints a line: the line goes above the bar(s).
        live = [f"[{HOST}:0] bar 2/3"] + ([f"[{HOST}:1] other 1/2"] if bars == "all" else [])
        term.wait_screen([f"[{HOST}:1] rank 1 says hi", *live])
        (tmp_path / "go2").touch()
        assert term.finish() == 0
        # Each bar's last state stays as a line, as on a terminal without the launcher.
        lines = term.screen.shown()
        assert lines[0] == f"[{HOST}:1] rank 1 says hi"
        assert sorted(lines[1:]) == [f"[{HOST}:0] bar 3/3", f"[{HOST}:1] other 1/2"]
        if bars == "one":  # rank 1's bar was never drawn, only its final state written
            assert term.raw.count(b"other 1/2") == 1
        assert_job_gone(timeout=1.0)
    finally:
        term.proc.kill()
        term.proc.wait()


def test_off_a_terminal_only_final_states_of_bars_are_written(tmp_path):
    proc = launch(
        "--np", "2", "--backend", "none", "--log-dir", str(tmp_path / "logs"), BARS, str(tmp_path), "free"
    )
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stdout + proc.stderr
    assert proc.stdout == f"[{HOST}:1] rank 1 says hi\n"
    assert sorted(proc.stderr.splitlines()) == [f"[{HOST}:0] bar 3/3", f"[{HOST}:1] other 1/2"]
    # The log files keep exactly what the rank wrote.
    assert (tmp_path / "logs" / "rank.0" / "stderr").read_bytes() == b"\rbar 1/3\rbar 2/3\rbar 3/3\n"


def test_error_file_names_the_failing_rank_host_code_and_stderr(tmp_path):
    errors = tmp_path / "out" / "error.json"
    errors.parent.mkdir()
    errors.write_text("left by an earlier job")
    proc = launch(
        "--np",
        "2",
        "--backend",
        "none",
        "--error-file",
        str(errors),
        BEHAVE,
        str(tmp_path),
        "exit3@1",
        "sleep",
    )
    assert proc.returncode == 3, proc.stderr
    report = json.loads(errors.read_text())
    cause = report["root_cause"]
    assert (report["state"], report["exit_code"], report["job_id"]) == ("failed", 3, report["job_id"])
    assert (cause["rank"], cause["host"], cause["exit_code"], cause["signal"]) == ("1", HOST, 3, None)
    assert cause["stderr_tail"] == ["rank 1 is failing on purpose"]
    assert report["message"].startswith(f"rank 1 on host {HOST} failed first (exit code 3)")
    # A job that succeeds leaves no error file behind (not even an earlier job's).
    proc = launch("--np", "1", "--backend", "none", "--error-file", str(errors), BEHAVE, str(tmp_path), "ok")
    assert proc.returncode == 0 and not errors.exists()
