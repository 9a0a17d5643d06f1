"""Pre-emption: stop signals reach every rank as sent, a grace period before SIGKILL, and a trainer that
checkpoints on the signal resumes from there with the same command (Horovod and TF-server)."""

from __future__ import annotations

import json
import signal
import time

import pytest

from support.launcher_run import (
    assert_job_gone,
    finish,
    launch,
    rank_script,
    signal_when,
    start_launch,
    wait_ready,
)

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(60)]
BEHAVE = rank_script("behave.py")
STOP_SIGNALS = [signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2]


@pytest.mark.parametrize("sig", STOP_SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_stop_signals_reach_every_rank_as_sent_then_sigkill_after_the_grace_period(tmp_path, sig):
    # Ranks 0 and 1 record the signal and exit; rank 2 ignores it and is killed when the grace ends.
    errors = tmp_path / "error.json"
    args = ["--np", "3", "--backend", "none", "--grace-period", "1", "--error-file", str(errors)]
    launcher = start_launch(*args, BEHAVE, str(tmp_path), "deaf@2", "trap")
    try:
        wait_ready(tmp_path, 3)
        launcher.send_signal(sig)
        ((code, _, err),) = finish(launcher, timeout=30)
        name = signal.Signals(sig).name
        assert code == 128 + sig, err
        assert [(tmp_path / f"signal.{r}").read_text() for r in (0, 1)] == [name, name]
        assert f"launch: received {name}; passed it to every worker" in err
        assert "1 process(es) still ran after the grace period and were killed" in err
        report = json.loads(errors.read_text())
        assert (report["state"], report["signal"], report["exit_code"]) == ("stopped", name, 128 + sig)
        assert_job_gone(timeout=1.0)
    finally:
        launcher.kill()
        launcher.wait()


def test_a_second_ctrl_c_ends_the_grace_period(tmp_path):
    launcher = start_launch(
        "--np", "2", "--backend", "none", "--grace-period", "300", BEHAVE, str(tmp_path), "deaf"
    )
    try:
        wait_ready(tmp_path, 2)
        launcher.send_signal(signal.SIGINT)
        time.sleep(1.0)
        assert launcher.poll() is None  # waiting for the ranks, which ignore SIGINT
        launcher.send_signal(signal.SIGINT)
        ((code, _, err),) = finish(launcher, timeout=30)  # not the 300 s grace
        assert code == 128 + signal.SIGINT, err
        assert "2 process(es) still ran after the grace period and were killed" in err
        assert_job_gone(timeout=1.0)
    finally:
        launcher.kill()
        launcher.wait()


def _steps(logdir, rank: int) -> list[list[str]]:
    return [line.split() for line in (logdir / f"steps.{rank}").read_text().splitlines()]


def _preempt_and_resume(tmp_path, args: list[str], backend: str) -> None:
    """Run preempt_train.py, SIGUSR1 the launcher mid-training, check the checkpoint; run the same
    command again and check it resumes from that checkpoint."""
    logdir = tmp_path / "train"
    logdir.mkdir()
    command = [*args, rank_script("preempt_train.py"), str(logdir), backend]
    env = {"TF_CPP_MIN_LOG_LEVEL": "2"}
    code, _, err = signal_when((logdir / "ready").exists, *command, env=env)
    assert code == 128 + signal.SIGUSR1, err[-3000:]
    assert_job_gone(timeout=1.0)
    # Both workers stopped after the same step, and the chief saved it.
    ends = {int(_steps(logdir, r)[-1][1]) for r in (0, 1)}
    assert len(ends) == 1, ends
    (stopped,) = ends
    assert 7 <= stopped < 15  # the signal came mid-training
    pointer = (logdir / "checkpoint").read_text().splitlines()[0]
    assert pointer == f'model_checkpoint_path: "model-{stopped}"', pointer
    assert "Stop requested: saving a checkpoint" in err or stopped % 5 == 0  # epoch ends save anyway

    (logdir / "ready").unlink()
    proc = launch(*command, env=env, timeout=150)
    assert proc.returncode == 0, proc.stderr[-3000:]
    epoch = stopped // 5 + 1  # a checkpoint mid-epoch resumes that epoch, one at its end the next one
    for rank in (0, 1):
        assert _steps(logdir, rank)[-2:] == [
            ["start", str(epoch), str(stopped)],
            ["end", str(stopped + (3 - epoch + 1) * 5)],
        ]


@pytest.mark.slow
@pytest.mark.horovod
@pytest.mark.timeout(300)
def test_sigusr1_checkpoints_a_horovod_job_and_the_same_command_resumes(horovod_required, tmp_path):
    _preempt_and_resume(tmp_path, ["--np", "2", "--backend", "horovod"], "horovod")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigusr1_checkpoints_a_tf_server_job_and_the_same_command_resumes(tmp_path):
    _preempt_and_resume(tmp_path, ["--np", "2", "--backend", "tf-server", "--ps", "1"], "tf-server")
