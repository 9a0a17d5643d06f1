"""The loop a scheduler runs with each example that trains for real: start it under the real `launch`,
pre-empt it with SIGUSR1 once a checkpoint exists, run the same command again. The second run resumes
at the saved step, ends at the requested epoch, and keeps the first run's history."""

import json
import re
import signal
from pathlib import Path

import pytest

from support.image_datasets import write_ilsvrc12
from support.launcher_run import assert_job_gone, launch, signal_when

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ENV = {"TF_CPP_MIN_LOG_LEVEL": "2"}

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess, pytest.mark.horovod]


def rank0_output(stdout: str) -> str:
    """Rank 0's lines of a launcher's output, without the ``[host:rank]`` prefix."""
    return "\n".join(m.group(1) for m in re.finditer(r"^\[[^\]\s]+:0\] ?(.*)$", stdout, re.MULTILINE))


def preempt_then_resume(cwd: Path, command: list[str], name: str, what: str, epochs: int, val_key: str):
    """Run ``launch --np 2 COMMAND`` twice around a SIGUSR1 and check both runs' summaries and logs."""
    launch_args = ["--np", "2", *command]
    logdir = cwd / "train_log" / name
    checkpoint = lambda: list(logdir.glob("model-*.index"))
    code, stdout, err = signal_when(checkpoint, *launch_args, cwd=cwd, env=ENV)
    out = rank0_output(stdout)
    assert code == 128 + signal.SIGUSR1, stdout[-3000:] + err[-3000:]
    assert_job_gone(timeout=1.0)
    stopped = re.search(
        rf"Stopped {re.escape(what)} by SIGUSR1 after epoch (\d+) of {epochs} "
        rf"\(this run: (\d+) epoch\(s\), (\d+) step\(s\) in ",
        out,
    )
    assert stopped, out[-3000:] + err[-3000:]
    epoch, epochs_run, step = map(int, stopped.groups())
    assert 1 <= epoch < epochs and epochs_run == epoch
    ckpt = str(Path("train_log", name, f"model-{step}"))
    assert f"checkpoint: {ckpt}\nrun the same command to resume from it" in out
    first_stats = json.loads((logdir / "stats.json").read_text())
    assert [r["epoch_num"] for r in first_stats if val_key in r] == list(range(1, epoch + 1))
    first_events = sorted(logdir.glob("events.out.tfevents.*"))
    assert len(first_events) == 1

    second = launch(*launch_args, cwd=cwd, env=ENV, timeout=150)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    out = rank0_output(second.stdout)
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[0] == f"resuming from {ckpt} at epoch {epoch + 1} of {epochs}", lines[:3]
    steps_per_epoch = first_stats[0]["global_step"]
    # A mid-epoch checkpoint resumes its epoch in full from the saved step.
    trained = (epochs - epoch) * steps_per_epoch
    assert (
        f"Trained {what} for {epochs} epochs (this run: {epochs - epoch} epoch(s), {trained} step(s)" in out
    )
    assert f"checkpoint: {Path('train_log', name, f'model-{step + trained}')}" in out.splitlines()
    assert "run the same command" not in out
    stats = json.loads((logdir / "stats.json").read_text())
    assert [r["epoch_num"] for r in stats if val_key in r] == list(range(1, epochs + 1))
    assert stats[: len(first_stats)] == first_stats  # the first run's records, unchanged
    events = sorted(logdir.glob("events.out.tfevents.*"))
    assert first_events[0] in events and len(events) == 2
    assert "Stop requested" in (logdir / "log.log").read_text() or step % steps_per_epoch == 0


@pytest.mark.timeout(300)
def test_cifar_resnet_resumes_after_a_preemption(tmp_path, horovod_required):
    command = [str(EXAMPLES / "resnet" / "cifar_resnet.py"), "--short", "--epochs", "3"]
    preempt_then_resume(tmp_path, command, "resnet", "ResNet-8 on 2 process(es)", 3, "validation_error")


@pytest.mark.timeout(300)
def test_digits_resumes_after_a_preemption(tmp_path, horovod_required):
    # Batches of 4 per rank: about a second per epoch, so the signal comes well before the end.
    command = [str(EXAMPLES / "digits" / "train.py"), "--epochs", "4", "--batch", "8"]
    preempt_then_resume(
        tmp_path, command, "digits", "the digits convnet on 2 process(es)", 4, "validation_error"
    )


@pytest.mark.timeout(300)
def test_imagenet_resnet_resumes_after_a_preemption(tmp_path, horovod_required):
    data = write_ilsvrc12(str(tmp_path / "ilsvrc"), num_classes=4, train_per_class=64, num_val=32, num_test=0)
    command = [
        str(EXAMPLES / "imagenet" / "resnet.py"), "--short", "--epochs", "3", "--workers", "1",
        "--data", data.root, "--meta-dir", data.meta_dir,
    ]  # fmt: skip
    what = "ResNet-10 (64 px) on 2 process(es)"
    preempt_then_resume(tmp_path, command, "imagenet-resnet", what, 3, "val-error-top1")
