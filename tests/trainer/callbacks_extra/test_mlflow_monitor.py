"""MLflowMonitor logs to a local store in the log directory; the real MLflow client reads it back."""

from __future__ import annotations

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from support.trainer_models import ArrayBatches, SoftmaxClassifier, blobs
from towerpack.trainer import (
    DumpTensorAsImage,
    MLflowMonitor,
    SimpleTrainer,
    ThroughputTracker,
    TrainConfig,
    launch_train_with_config,
)
from towerpack.trainer.callbacks.base import Callback
from towerpack.trainer.compat import tf

pytestmark = pytest.mark.usefixtures("graph")

X, LABEL = blobs(128, seed=6)


class Picture(SoftmaxClassifier):
    def build_graph(self, x, label):
        tf.constant(np.full((4, 5), 0.5, np.float32), name="picture")
        return super().build_graph(x, label)


def train(monitor, callbacks=(), epochs=2):
    config = TrainConfig(
        model=Picture(),
        dataflow=ArrayBatches(X, LABEL, batch_size=32),
        callbacks=list(callbacks),
        monitors=[monitor],
        steps_per_epoch=3,
        max_epoch=epochs,
    )
    trainer = SimpleTrainer()
    launch_train_with_config(config, trainer)
    return trainer


def test_runs_are_logged_locally_and_read_back(logdir, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monitor = MLflowMonitor(
        experiment_name="digits", run_name="first", params={"lr": 0.1}, tags={"team": "a"}
    )
    trainer = train(monitor, [ThroughputTracker(), DumpTensorAsImage("picture", scale=1.0)])

    client = MlflowClient(tracking_uri=f"sqlite:///{logdir}/mlflow.db")
    experiment = client.get_experiment_by_name("digits")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_id == monitor.run_id and run.info.run_name == "first"
    assert run.info.status == "FINISHED"
    assert run.data.params == {"lr": "0.1", "steps_per_epoch": "3", "starting_epoch": "1", "max_epoch": "2"}
    assert run.data.tags["team"] == "a"
    cost = client.get_metric_history(run.info.run_id, "cost")
    assert [m.step for m in cost] == [s for s, _ in trainer.monitors.get_history("cost")] == [3, 6]
    assert [m.value for m in cost] == pytest.approx([v for _, v in trainer.monitors.get_history("cost")])
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "epoch_num")] == [
        (3, 1),
        (6, 2),
    ]
    # "Throughput (steps/sec)" is not an MLflow key: parentheses become "_".
    throughput = client.get_metric_history(run.info.run_id, "Throughput _steps/sec_")
    assert [m.step for m in throughput] == [3, 6] and all(m.value > 0 for m in throughput)
    images = [f.path for f in client.list_artifacts(run.info.run_id, "images") if f.path.endswith(".png")]
    assert sorted(p.split("+")[2] for p in images) == ["3", "6"] and all("picture" in p for p in images)
    assert (logdir / "mlartifacts").is_dir()

    # A second run in the same store, which fails: marked FAILED, in the default experiment.
    class Fail(Callback):
        def _trigger_epoch(self):
            raise RuntimeError("boom")

    failing = MLflowMonitor()
    with tf.Graph().as_default(), pytest.raises(RuntimeError, match="boom"):
        train(failing, [Fail()])
    failed = client.get_run(failing.run_id)
    assert failed.info.status == "FAILED"
    assert client.get_experiment(failed.info.experiment_id).name == "towerpack"


def test_without_a_log_directory_nothing_is_logged(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monitor = MLflowMonitor()
    train(monitor, epochs=1)
    assert monitor.run_id is None and list(tmp_path.iterdir()) == []
    assert any("MLflowMonitor logs nothing" in r.getMessage() for r in caplog.records)
