"""Synchronized BatchNorm over the towers of one process and over Horovod ranks: N replicas at
batch b train exactly like one at batch N*b (statistics, gradients through the all-reduce,
weights, moving averages)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from support.dist_models import FetchVariables, RankSlices
from support.launcher_run import launch
from support.syncbn_model import SyncBNNet, syncbn_data
from towerpack.trainer import (
    QueueInput,
    SimpleTrainer,
    SyncMultiGPUTrainerParameterServer,
    SyncMultiGPUTrainerReplicated,
    TrainConfig,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf

BATCH = 4
# Float64 throughout: only the summation order differs between the runs.
RTOL = 1e-8
COMPARED = (
    "conv0/W",
    "bn0/gamma",
    "bn0/beta",
    "bn0/mean/EMA",
    "bn0/variance/EMA",
    "conv1/W",
    "conv1/bn/gamma",
    "conv1/bn/mean/EMA",
    "conv1/bn/variance/EMA",
    "fc/W",
    "fc/b",
    "conv0/W/Momentum",
    "bn0/gamma/Momentum",
)


def _train(trainer, sync, batch, towers=1) -> dict:
    x, y = syncbn_data()
    out: dict = {}
    with tf.Graph().as_default():
        config = TrainConfig(
            model=SyncBNNet(sync),
            data=QueueInput(RankSlices(x, y, batch)),
            callbacks=[FetchVariables(out)],
            monitors=[],
            extra_callbacks=[],
            max_epoch=2,
            steps_per_epoch=len(RankSlices(x, y, batch * towers)),
        )
        launch_train_with_config(config, trainer)
    return out


@pytest.mark.parametrize("kind", ["replicated", "parameter-server"])
def test_towers_with_synchronized_statistics_match_one_tower_at_the_total_batch(kind):
    towers = 2
    expected = _train(SimpleTrainer(), "nccl", BATCH * towers)

    def make():
        if kind == "replicated":
            return SyncMultiGPUTrainerReplicated(towers, broadcast_every_epoch=False)
        return SyncMultiGPUTrainerParameterServer(towers, ps_device="cpu")

    got = _train(make(), "nccl", BATCH, towers)
    for name in COMPARED:
        np.testing.assert_allclose(got[name], expected[name], rtol=RTOL, atol=1e-12, err_msg=name)
    assert not np.allclose(expected["bn0/mean/EMA"], 0)  # the statistics moved
    # Without synchronization each tower normalizes by its own half batch: different training.
    unsynced = _train(make(), None, BATCH, towers)
    assert not np.allclose(unsynced["conv0/W"], expected["conv0/W"], rtol=1e-4)


HVD_SCRIPT = str(Path(__file__).parent / "scripts" / "hvd_syncbn.py")


@pytest.mark.multiprocess
@pytest.mark.horovod
@pytest.mark.timeout(180)
def test_horovod_ranks_with_synchronized_statistics_match_one_process(tmp_path, horovod_required):
    ranks = 2
    proc = launch(
        "--np", str(ranks), "--backend", "horovod", HVD_SCRIPT, str(tmp_path), str(BATCH), timeout=150
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = _train(SimpleTrainer(), "nccl", BATCH * ranks)
    for r in range(ranks):
        with np.load(tmp_path / f"vars.{r}.npz") as f:
            got = {k.replace("__", "/"): f[k] for k in f.files}
        for name in COMPARED:
            np.testing.assert_allclose(
                got[name], expected[name], rtol=RTOL, atol=1e-12, err_msg=f"rank {r} {name}"
            )
