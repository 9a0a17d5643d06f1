"""--max-restarts: the whole job starts again with RESTART_COUNT and resumes from its checkpoint."""

from __future__ import annotations

import pytest

from support.launcher_run import launch, rank_script

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(90)]
RESUME = rank_script("resume.py")


def test_job_restarts_and_resumes_from_checkpoint(tmp_path):
    logs = tmp_path / "logs"
    proc = launch(
        "--np", "2", "--backend", "none", "--max-restarts", "2", "--log-dir", str(logs), RESUME, str(tmp_path)
    )
    assert proc.returncode == 0, proc.stderr
    assert "rank 1 on host" in proc.stderr and "restarting the job (restart 1 of 2)" in proc.stderr
    assert (tmp_path / "ckpt").read_text() == "6"
    log0 = (tmp_path / "log.0").read_text().splitlines()
    assert log0[0] == "attempt 0 start 0"
    assert len(log0) == 2 and log0[1].startswith("attempt 1 start ") and int(log0[1].split()[-1]) >= 3
    # One set of log files per attempt.
    assert "attempt 0 starts at step 0" in (logs / "rank.0" / "stdout").read_text()
    assert "attempt 1 starts at step" in (logs / "rank.0" / "stdout.1").read_text()
    assert "fails in attempt 0" in (logs / "rank.1" / "stderr").read_text()


def test_restarts_run_out(tmp_path):
    proc = launch(
        "--np", "2", "--backend", "none", "--max-restarts", "1", RESUME, str(tmp_path), "always-fail"
    )
    assert proc.returncode == 7, proc.stderr
    assert proc.stderr.count("restarting the job") == 1
    assert "failed first (exit code 7)" in proc.stderr and "fails in attempt 1" in proc.stderr
    attempts = [line.split()[1] for line in (tmp_path / "log.1").read_text().splitlines()]
    assert attempts == ["0", "1"]


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_trainer_with_auto_resume_continues_from_its_checkpoint(tmp_path):
    logdir = tmp_path / "train"
    proc = launch(
        "--np", "1", "--backend", "none", "--max-restarts", "1",
        rank_script("autoresume_train.py"), str(logdir),
        env={"TF_CPP_MIN_LOG_LEVEL": "2"}, timeout=140,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "restarting the job (restart 1 of 1)" in proc.stderr
    # Epochs 1-2 in the first attempt; the restart resumes at epoch 3 from the epoch-2 checkpoint (step 8).
    assert (logdir / "epochs.txt").read_text().splitlines() == [
        "attempt 0 epoch 1 step 4",
        "attempt 0 epoch 2 step 8",
        "attempt 1 epoch 3 step 12",
        "attempt 1 epoch 4 step 16",
    ]
