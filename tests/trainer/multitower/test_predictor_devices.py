"""A trainer's predictors on a machine without GPUs: the predictor for tower k runs where training
tower k runs (logical CPU device /cpu:k) and reads that tower's replica of the variables."""

from __future__ import annotations

import numpy as np
import pytest

from support.dist_models import DIM, RankSlices, Regression64, regression_data
from towerpack.trainer import (
    Callback,
    QueueInput,
    SyncMultiGPUTrainerReplicated,
    TrainConfig,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf, tfv1

pytestmark = pytest.mark.usefixtures("graph")


class PredictOnEachTower(Callback):
    """Builds a predictor for devices 0 and 1; after training, moves tower 1's replica away from
    tower 0's and records what each predictor computes and where its ops ran."""

    def __init__(self, x, y):
        self.x, self.y = x, y
        self.results: dict[int, dict] = {}

    def _setup_graph(self):
        self.predictors = {k: self.trainer.get_predictor(["x", "y"], ["cost"], device=k) for k in (0, 1)}
        # tower 1's replicas are local variables
        found = {v.op.name: v for v in tfv1.global_variables() + tfv1.local_variables()}
        scopes = {0: "", 1: "tower1/"}
        self.variables = {k: {n: found[f"{scope}{n}"] for n in ("w", "b")} for k, scope in scopes.items()}
        self.shift = found["tower1/w"].assign_add(tf.ones([DIM], tf.float64))

    def _after_train(self):
        sess = self.trainer.sess
        sess.run(self.shift)  # the replicas differ from here on
        for k, pred in self.predictors.items():
            meta = tfv1.RunMetadata()
            feed = dict(zip(pred.input_tensors, (self.x, self.y), strict=True))
            options = tfv1.RunOptions(trace_level=tfv1.RunOptions.FULL_TRACE)
            sess.run(pred.output_tensors[0], feed, options=options, run_metadata=meta)
            ran_on = {
                dev.device.split("/")[-1]
                for dev in meta.step_stats.dev_stats
                for node in dev.node_stats
                if node.node_name.startswith(f"tower-pred-{k}/")
            }
            self.results[k] = {
                "cost": pred(self.x, self.y)[0],
                "placed": pred.output_tensors[0].device,
                "ran_on": ran_on,
                "variables": sess.run(self.variables[k]),
            }


def test_predictor_of_tower_1_runs_on_cpu_1_with_tower_1s_variables():
    x, y = regression_data()
    vx, vy = regression_data(n=16, seed=7)
    probe = PredictOnEachTower(vx, vy)
    config = TrainConfig(
        model=Regression64(),
        data=QueueInput(RankSlices(x, y, 4)),
        callbacks=[probe],
        monitors=[],
        extra_callbacks=[],
        max_epoch=1,
        steps_per_epoch=3,
    )
    launch_train_with_config(config, SyncMultiGPUTrainerReplicated(2))

    assert probe.results[0]["placed"] == "/device:CPU:0"
    assert probe.results[1]["placed"] == "/device:CPU:1"
    assert probe.results[0]["ran_on"] == {"device:CPU:0"}
    assert probe.results[1]["ran_on"] == {"device:CPU:1"}
    w0, w1 = probe.results[0]["variables"]["w"], probe.results[1]["variables"]["w"]
    np.testing.assert_allclose(w1 - w0, 1.0)
    for result in probe.results.values():
        v = result["variables"]
        expected = np.mean((vx @ v["w"] + v["b"] - vy) ** 2)
        assert result["cost"] == pytest.approx(expected, rel=1e-12)
