"""PreemptionSaver: a stop signal ends training after the current step with a checkpoint that
AutoResumeTrainConfig continues from; Horovod ranks agree on the step to stop at."""

import json
import os
import signal
from pathlib import Path

import pytest

from support.launcher_run import launch
from support.trainer_models import ArrayBatches, LinearRegression, linear_data
from towerpack.trainer import (
    DEFAULT_CALLBACKS,
    AutoResumeTrainConfig,
    Callback,
    JSONWriter,
    ModelSaver,
    PreemptionSaver,
    SimpleTrainer,
    TrainConfig,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf

STEPS = 4  # 64 samples / batch 16


@pytest.fixture(autouse=True)
def python_ctrl_c():
    """Python's own SIGINT handling, also when pytest started with SIGINT ignored (``&`` in a script)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


class SignalAt(Callback):
    """Sends ``signals`` to this process after global step ``step``; records each epoch's start."""

    def __init__(self, step, *signals):
        self.step, self.signals, self.epochs = step, signals, []

    def _before_epoch(self):
        self.epochs.append((self.epoch_num, self.global_step))

    def _trigger_step(self):
        if self.global_step == self.step:
            for sig in self.signals:
                os.kill(os.getpid(), sig)


def train(config_cls=TrainConfig, callbacks=(), saver=None, **kw):
    x, y, _ = linear_data(64, seed=3)
    saver = saver or PreemptionSaver()
    with tf.Graph().as_default():
        trainer = SimpleTrainer()
        config = config_cls(
            model=LinearRegression(lr=0.02),
            dataflow=ArrayBatches(x, y, batch_size=16),
            callbacks=list(callbacks),
            extra_callbacks=[saver],
            monitors=[JSONWriter()],
            max_epoch=3,
            **kw,
        )
        launch_train_with_config(config, trainer)
    return trainer, saver


def _checkpoint(logdir):
    return (logdir / "checkpoint").read_text().splitlines()[0]


def test_is_a_default_callback_and_runs_on_every_process():
    assert [type(cb) for cb in DEFAULT_CALLBACKS() if isinstance(cb, PreemptionSaver)] == [PreemptionSaver]
    assert not PreemptionSaver().chief_only


def test_a_signal_mid_epoch_saves_stops_and_resumes_at_that_step(logdir):
    sender = SignalAt(6, signal.SIGUSR1)
    trainer, saver = train(callbacks=[ModelSaver(), sender])
    assert trainer.global_step == 6 and saver.received == signal.SIGUSR1
    assert (
        saver.saved == str(logdir / "model-6") and _checkpoint(logdir) == 'model_checkpoint_path: "model-6"'
    )
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL  # handlers restored after training

    again = SignalAt(-1)
    resumed, saver = train(AutoResumeTrainConfig, callbacks=[ModelSaver(), again])
    # Epoch 2 had not finished: it runs again from the checkpoint's step.
    assert again.epochs == [(2, 6), (3, 6 + STEPS)] and resumed.global_step == 6 + 2 * STEPS
    assert saver.received is None


def test_a_signal_in_the_last_step_of_an_epoch_lets_the_epoch_finish(logdir):
    sender = SignalAt(2 * STEPS, signal.SIGTERM)
    trainer, saver = train(callbacks=[ModelSaver(), sender])
    assert trainer.global_step == 2 * STEPS and sender.epochs[:2] == [(1, 0), (2, STEPS)]
    assert [s["epoch_num"] for s in json.loads((logdir / "stats.json").read_text())] == [1, 2]
    assert saver.saved == str(logdir / f"model-{2 * STEPS}")  # the epoch's own checkpoint

    again = SignalAt(-1)
    train(AutoResumeTrainConfig, callbacks=[ModelSaver(), again])
    assert again.epochs == [(3, 2 * STEPS)]


def test_without_a_model_saver_training_just_stops(logdir):
    # The saver takes only signals left at their default: under nohup SIGHUP is ignored.
    previous = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        trainer, saver = train(callbacks=[SignalAt(3, signal.SIGHUP)])
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert trainer.global_step == 3 and saver.saved == ""
    assert not (logdir / "checkpoint").exists()


def test_a_second_ctrl_c_interrupts_at_once(logdir):
    with pytest.raises(KeyboardInterrupt):
        train(callbacks=[ModelSaver(), SignalAt(3, signal.SIGINT, signal.SIGINT)])
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_handlers_of_the_users_own_are_left_alone(logdir):
    seen = []
    previous = signal.signal(signal.SIGUSR2, lambda *_: seen.append("mine"))
    try:
        trainer, saver = train(callbacks=[SignalAt(3, signal.SIGUSR2)])
        assert seen == ["mine"] and trainer.global_step == 3 * STEPS and saver.received is None
    finally:
        signal.signal(signal.SIGUSR2, previous)


HVD_SCRIPT = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
from support.trainer_models import ArrayBatches, LinearRegression, linear_data
from towerpack.trainer import Callback, HorovodTrainer, ModelSaver, TrainConfig, logger
from towerpack.trainer import launch_train_with_config

trainer = HorovodTrainer()
logdir = sys.argv[1]
if trainer.rank == 0:
    logger.set_logger_dir(logdir, action="k")

class Only1Signals(Callback):
    _chief_only = False
    def _trigger_step(self):
        if trainer.rank == 1 and self.global_step == 3:
            os.kill(os.getpid(), signal.SIGUSR1)
    def _after_train(self):
        with open(os.path.join(logdir, f"end.{trainer.rank}"), "w") as f:
            f.write(str(self.global_step))

x, y, _ = linear_data(64, seed=3)
config = TrainConfig(model=LinearRegression(lr=0.02), dataflow=ArrayBatches(x, y, batch_size=16),
                     callbacks=[ModelSaver(), Only1Signals()], steps_per_epoch=400, max_epoch=1)
launch_train_with_config(config, trainer)
"""


@pytest.mark.multiprocess
@pytest.mark.horovod
@pytest.mark.timeout(120)
def test_horovod_ranks_stop_after_the_same_step_and_rank_0_saves(horovod_required, tmp_path):
    # Only rank 1 gets the signal (after step 3): the ranks' vote, fetched about every 0.2 s, stops
    # both after the same later step, long before the end.
    script = tmp_path / "train.py"
    script.write_text(HVD_SCRIPT)
    tests = str(Path(__file__).resolve().parents[1])
    proc = launch(
        "--np", "2", "--backend", "horovod", str(script), str(tmp_path), tests,
        env={"TF_CPP_MIN_LOG_LEVEL": "2"}, timeout=110,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    ends = {(tmp_path / f"end.{r}").read_text() for r in (0, 1)}
    assert len(ends) == 1, ends
    (step,) = ends
    assert 3 < int(step) < 400
    assert _checkpoint(tmp_path) == f'model_checkpoint_path: "model-{step}"'
    assert "Training was stopped by StopTraining: received a stop request of another rank" in proc.stderr
