"""Checkpoints: ModelSaver, a failed save, MinSaver/MaxSaver, and AutoResume."""

import json
import os
import shutil

import numpy as np
import pytest

from support.trainer_models import ArrayBatches, LinearRegression, linear_data
from towerpack.trainer import (
    AutoResumeTrainConfig,
    Callback,
    JSONWriter,
    MaxSaver,
    MinSaver,
    ModelSaver,
    PeriodicTrigger,
    SaverRestore,
    SimpleTrainer,
    SmartInit,
    TrainConfig,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf, tfv1

STEPS = 8  # 128 samples / batch 16


def linear_config(**kw):
    x, y, _ = linear_data(128, seed=5)
    kw.setdefault("monitors", [JSONWriter()])
    kw.setdefault("extra_callbacks", [])
    return dict(
        model=LinearRegression(lr=0.02, momentum=0.9), dataflow=ArrayBatches(x, y, batch_size=16), **kw
    )


class Snapshot(Callback):
    """Weights and optimizer slots at the end of training (read before the session closes)."""

    def _trigger(self):
        variables = tfv1.global_variables()
        self.values = dict(zip([v.op.name for v in variables], self.trainer.sess.run(variables), strict=True))


def train(config_cls=TrainConfig, **kw):
    with tf.Graph().as_default():
        snap = Snapshot()
        trainer = SimpleTrainer()
        launch_train_with_config(
            config_cls(**linear_config(callbacks=[*kw.pop("callbacks", []), snap], **kw)), trainer
        )
    return trainer, snap.values


def pointer(directory):
    return tfv1.train.get_checkpoint_state(str(directory))


def test_model_saver_keeps_the_latest_checkpoints(logdir):
    train(callbacks=[ModelSaver(max_to_keep=2, keep_checkpoint_every_n_hours=0)], max_epoch=4)
    state = pointer(logdir)
    assert os.path.basename(state.model_checkpoint_path) == f"model-{4 * STEPS}"
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == [
        f"model-{3 * STEPS}",
        f"model-{4 * STEPS}",
    ]
    assert not (logdir / f"model-{STEPS}.index").exists()
    assert any(f.startswith("graph-") and f.endswith(".meta") for f in os.listdir(logdir))
    assert int(tfv1.train.load_variable(str(logdir / f"model-{4 * STEPS}"), "global_step")) == 4 * STEPS


def test_a_save_failing_midway_leaves_the_pointer_on_the_previous_checkpoint(logdir):
    # A directory where the second checkpoint's index file must go makes that save fail after
    # its data was written.
    (logdir / f"model-{2 * STEPS}.index").mkdir()
    trainer, _ = train(callbacks=[ModelSaver()], max_epoch=2)
    assert trainer.global_step == 2 * STEPS  # the failed save did not stop training
    assert (logdir / f"model-{2 * STEPS}.data-00000-of-00001").exists()  # the save got halfway
    state = pointer(logdir)
    assert os.path.basename(state.model_checkpoint_path) == f"model-{STEPS}"
    latest = tfv1.train.latest_checkpoint(str(logdir))
    assert int(tfv1.train.load_variable(latest, "global_step")) == STEPS


class Report(Callback):
    def __init__(self, values):
        self.values = list(values)

    def _trigger(self):
        self.trainer.monitors.put_scalar("val", self.values[self.trainer.epoch_num - 1])


@pytest.mark.parametrize(
    ("saver", "values", "best_epoch"),
    [
        (MinSaver, [3.0, 1.0, 2.0], 2),
        (MaxSaver, [1.0, 3.0, 2.0], 2),
    ],
)
def test_min_and_max_saver_keep_the_best_checkpoint(logdir, saver, values, best_epoch):
    train(callbacks=[Report(values), ModelSaver(), saver("val")], max_epoch=3)
    name = "min-val" if saver is MinSaver else "max-val"
    assert int(tfv1.train.load_variable(str(logdir / name), "global_step")) == best_epoch * STEPS


def test_auto_resume_continues_at_the_next_epoch_with_weights_and_optimizer_state(logdir):
    _, straight = train(max_epoch=4, monitors=[])
    logdir_2 = logdir.parent / "resume"
    from towerpack.trainer import logger

    logger.set_logger_dir(str(logdir_2), action="d")
    first, _ = train(callbacks=[ModelSaver()], max_epoch=2)
    assert first.global_step == 2 * STEPS

    seen = []

    class Epochs(Callback):
        def _before_epoch(self):
            seen.append((self.trainer.epoch_num, self.trainer.global_step))

    resumed, values = train(AutoResumeTrainConfig, callbacks=[ModelSaver(), Epochs()], max_epoch=4)
    assert resumed.starting_epoch == 3
    assert seen == [(3, 2 * STEPS), (4, 3 * STEPS)]
    assert resumed.global_step == 4 * STEPS
    for name in ("w", "b", "w/Momentum", "b/Momentum"):
        np.testing.assert_allclose(values[name], straight[name], rtol=1e-5, atol=1e-6)
    stats = json.loads((logdir_2 / "stats.json").read_text())
    assert [s["epoch_num"] for s in stats] == [1, 2, 3, 4]
    assert [s["global_step"] for s in stats] == [STEPS, 2 * STEPS, 3 * STEPS, 4 * STEPS]


def test_auto_resume_after_a_crash_mid_epoch_keeps_stats_consistent(logdir):
    class CrashInEpoch3(Callback):
        def _trigger_step(self):
            if self.trainer.epoch_num == 3:
                self.trainer.monitors.put_scalar("partial", 1.0)
                if self.trainer.local_step == 2:
                    raise RuntimeError("power cut")

    with pytest.raises(RuntimeError, match="power cut"):
        train(callbacks=[ModelSaver(), CrashInEpoch3()], max_epoch=5)
    before = json.loads((logdir / "stats.json").read_text())
    assert [s["epoch_num"] for s in before] == [1, 2, 3, 3]  # two records from the crashed epoch

    resumed, _ = train(AutoResumeTrainConfig, callbacks=[ModelSaver()], max_epoch=4)
    assert resumed.starting_epoch == 3
    stats = json.loads((logdir / "stats.json").read_text())
    assert [s["epoch_num"] for s in stats] == [1, 2, 3, 4]
    assert all("partial" not in s for s in stats)
    backups = [f for f in os.listdir(logdir) if f.startswith("stats.json.")]
    assert len(backups) == 1 and json.loads((logdir / backups[0]).read_text()) == before


def test_auto_resume_in_an_empty_directory_starts_fresh(logdir):
    config = AutoResumeTrainConfig(**linear_config(max_epoch=1))
    assert config.starting_epoch == 1 and config.resumed_from is None


class Epochs(Callback):
    """Records (epoch_num, global_step) at the start of every epoch."""

    def __init__(self):
        self.seen = []

    def _before_epoch(self):
        self.seen.append((self.trainer.epoch_num, self.trainer.global_step))


def test_auto_resume_finds_the_checkpoint_after_the_log_directory_moved(logdir):
    from towerpack.trainer import logger

    train(callbacks=[ModelSaver()], max_epoch=2)
    assert str(logdir) not in (logdir / "checkpoint").read_text()  # relative paths
    moved = logdir.parent / "moved"
    logger.unset_logger_dir()
    shutil.move(str(logdir), str(moved))
    logger.set_logger_dir(str(moved), action="k")

    epochs = Epochs()
    resumed, _ = train(AutoResumeTrainConfig, callbacks=[ModelSaver(), epochs], max_epoch=3)
    assert resumed.starting_epoch == 3
    assert epochs.seen == [(3, 2 * STEPS)]
    assert os.path.basename(tfv1.train.latest_checkpoint(str(moved))) == f"model-{3 * STEPS}"


def test_auto_resume_from_a_checkpoint_in_the_middle_of_an_epoch_runs_that_epoch_again(logdir):
    class ScalarsThenCrash(Callback):
        def _trigger_step(self):
            self.trainer.monitors.put_scalar("per_step", 1.0)
            if self.trainer.global_step == 2 * STEPS + 3:
                raise RuntimeError("power cut")

    # Saves at global step 12 (the middle of epoch 2); the crash comes in epoch 3, so stats.json
    # has per-step records of epoch 2 on both sides of the checkpoint, and epoch 2's end.
    saver = PeriodicTrigger(ModelSaver(), every_k_steps=12)
    with pytest.raises(RuntimeError, match="power cut"):
        train(callbacks=[saver, ScalarsThenCrash()], max_epoch=5)
    assert os.path.basename(tfv1.train.latest_checkpoint(str(logdir))) == "model-12"

    epochs = Epochs()
    resumed, _ = train(AutoResumeTrainConfig, callbacks=[epochs], max_epoch=3)
    assert resumed.starting_epoch == 2
    assert epochs.seen == [(2, 12), (3, 12 + STEPS)]
    stats = json.loads((logdir / "stats.json").read_text())
    assert all(s["epoch_num"] == 1 for s in stats if "per_step" in s)  # the old epoch 2 was dropped
    assert [(s["epoch_num"], s["global_step"]) for s in stats[-2:]] == [(2, 12 + STEPS), (3, 12 + 2 * STEPS)]


def test_auto_resume_from_the_end_of_a_crashed_epochs_last_checkpoint(logdir):
    """The checkpoint is the file's last record: a finished epoch is told from a cut-short one."""

    class CrashAfter(Callback):
        def __init__(self, step):
            self.step = step

        def _trigger_step(self):
            self.trainer.monitors.put_scalar("per_step", 1.0)

        def _before_run(self, ctx):
            if self.trainer.global_step == self.step:
                raise RuntimeError("power cut")

    saver = PeriodicTrigger(ModelSaver(), every_k_steps=4)
    with pytest.raises(RuntimeError, match="power cut"):
        train(callbacks=[saver, CrashAfter(STEPS + 4)], max_epoch=5)  # saved at 12, crashed next step
    assert json.loads((logdir / "stats.json").read_text())[-1]["global_step"] == STEPS + 4
    config = AutoResumeTrainConfig(**linear_config(max_epoch=3))
    assert config.resumed_from.endswith(f"model-{STEPS + 4}") and config.starting_epoch == 2


@pytest.mark.parametrize(
    ("given", "expected_epoch", "restores"),
    [
        (dict(starting_epoch=2), 2, True),
        (dict(session_init=SmartInit({})), 1, False),
        (dict(), 3, True),
    ],
    ids=["starting_epoch", "session_init", "nothing"],
)
def test_auto_resume_without_always_resume_keeps_what_the_caller_gave(
    logdir, given, expected_epoch, restores
):
    train(callbacks=[ModelSaver()], max_epoch=2)
    config = AutoResumeTrainConfig(always_resume=False, **linear_config(max_epoch=4, **given))
    assert config.starting_epoch == expected_epoch
    assert (config.resumed_from is not None) == restores
    assert isinstance(config.session_init, SaverRestore) == restores


def test_checkpoint_pointer_in_a_relative_directory(tmp_path, monkeypatch):
    from towerpack.trainer.callbacks.saver import write_checkpoint_pointer

    monkeypatch.chdir(tmp_path)
    os.makedirs("logs/run")
    for step in (1, 2):
        open(f"logs/run/model-{step}.index", "w").close()
    write_checkpoint_pointer("logs/run", "logs/run/model-2", ["logs/run/model-1", "logs/run/model-2"])
    assert tfv1.train.latest_checkpoint("logs/run") == os.path.join("logs/run", "model-2")
    assert 'model_checkpoint_path: "model-2"' in (tmp_path / "logs/run/checkpoint").read_text()
