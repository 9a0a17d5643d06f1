"""Monitors: TensorBoard event files read back, stats.json content, the printer, no-log-dir runs."""

import json
import logging
import os

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from support.trainer_models import ArrayBatches, SoftmaxClassifier, blobs
from towerpack.trainer import (
    Callback,
    JSONWriter,
    ScalarPrinter,
    SimpleTrainer,
    TFEventWriter,
    TrainConfig,
    launch_train_with_config,
)

pytestmark = pytest.mark.usefixtures("graph")
STEPS = 8


class Reporter(Callback):
    """Puts a scalar on step 3 of every epoch, and an image once."""

    def _trigger_step(self):
        if self.trainer.local_step == 2:
            self.trainer.monitors.put_scalar("tower0/custom-summary", self.trainer.epoch_num * 10)

    def _trigger(self):
        if self.trainer.epoch_num == 1:
            self.trainer.monitors.put_image("img", np.full((4, 5, 3), 200, np.uint8))


def run(max_epoch=2, **kw):
    x, label = blobs(256, seed=2)
    trainer = SimpleTrainer()
    config = TrainConfig(
        model=SoftmaxClassifier(), dataflow=ArrayBatches(x, label, batch_size=32), max_epoch=max_epoch, **kw
    )
    launch_train_with_config(config, trainer)
    return trainer


def test_event_files_hold_the_scalars_images_and_graph(logdir):
    trainer = run(callbacks=[Reporter()])
    events = [f for f in os.listdir(logdir) if f.startswith("events.out.tfevents")]
    assert len(events) == 1
    acc = EventAccumulator(str(logdir / events[0]), size_guidance={"scalars": 0, "images": 0})
    acc.Reload()
    tags = acc.Tags()
    assert {"cost", "accuracy", "custom"} <= set(tags["scalars"])
    cost = acc.Scalars("cost")
    assert [e.step for e in cost] == [STEPS, 2 * STEPS]
    history = trainer.monitors.get_history("cost")
    np.testing.assert_allclose([e.value for e in cost], [v for _, v in history], rtol=1e-6)
    assert [(e.step, e.value) for e in acc.Scalars("custom")] == [(3, 10.0), (STEPS + 3, 20.0)]
    (image,) = acc.Images("img/0")
    assert (image.width, image.height) == (5, 4)
    assert acc.Graph() is not None


def test_stats_json_has_a_record_per_epoch_and_per_reported_step(logdir):
    trainer = run(callbacks=[Reporter()])
    stats = json.loads((logdir / "stats.json").read_text())
    assert [(s["epoch_num"], s["global_step"]) for s in stats] == [
        (1, 3),
        (1, STEPS),
        (2, STEPS + 3),
        (2, 2 * STEPS),
    ]
    assert stats[0] == {"custom": 10.0, "epoch_num": 1, "global_step": 3}
    assert set(stats[1]) == {"cost", "accuracy", "input/wait_fraction", "epoch_num", "global_step"}
    assert stats[3]["accuracy"] == pytest.approx(trainer.monitors.get_latest("accuracy"))
    assert not (logdir / "stats.json.tmp").exists()


def test_a_fresh_run_in_a_used_directory_backs_up_stats(logdir):
    run(max_epoch=1, monitors=[JSONWriter()])
    from towerpack.trainer.compat import tf

    with tf.Graph().as_default():
        run(max_epoch=1, monitors=[JSONWriter()])
    backups = [f for f in os.listdir(logdir) if f.startswith("stats.json.")]
    assert len(backups) == 1
    assert [s["epoch_num"] for s in json.loads((logdir / "stats.json").read_text())] == [1]


def test_without_a_log_directory_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trainer = run(max_epoch=1, monitors=[TFEventWriter(), JSONWriter(), ScalarPrinter()])
    assert os.listdir(tmp_path) == []
    assert trainer.monitors.get_latest("accuracy") > 0


def test_scalar_printer_logs_filtered_scalars_per_epoch(caplog):
    with caplog.at_level(logging.INFO, logger="towerpack.trainer"):
        run(max_epoch=2, monitors=[ScalarPrinter(whitelist=["acc.*"])])
    printed = [r.getMessage() for r in caplog.records if r.getMessage().startswith(("accuracy:", "cost:"))]
    assert len(printed) == 2 and all(m.startswith("accuracy: ") for m in printed)


def test_unknown_scalar_names_are_clear_errors():
    trainer = run(max_epoch=1, monitors=[])
    with pytest.raises(KeyError, match="no scalar named 'nope'"):
        trainer.monitors.get_latest("nope")
