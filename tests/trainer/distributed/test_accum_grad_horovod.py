"""AccumGradOptimizer under HorovodTrainer: 2 real ranks started by `launch` (Gloo on loopback)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from support.dist_models import FetchVariables, RankSlices, Regression64, regression_data
from support.launcher_run import launch
from towerpack.trainer import SimpleTrainer, TrainConfig, launch_train_with_config
from towerpack.trainer.compat import tf

pytestmark = [pytest.mark.multiprocess, pytest.mark.horovod, pytest.mark.usefixtures("horovod_required")]

SCRIPT = str(Path(__file__).parent / "scripts" / "hvd_accum_grad.py")


def _simple(batch: int, lr: float) -> dict:
    x, y = regression_data()
    out: dict = {}
    with tf.Graph().as_default():
        config = TrainConfig(
            model=Regression64(seed=1, lr=lr),
            dataflow=RankSlices(x, y, batch),
            callbacks=[FetchVariables(out)],
            monitors=[],
            extra_callbacks=[],
            max_epoch=1,
        )
        launch_train_with_config(config, SimpleTrainer())
    return out


@pytest.mark.timeout(180)
def test_two_ranks_accumulating_two_steps_train_like_one_process_at_four_times_the_batch(tmp_path):
    """2 ranks x batch 8 x 2 accumulated steps (the sum, as the reference applies it) equals
    one process at batch 32 with twice the learning rate (1/32 and 1/16: exact in float32)."""
    ranks, niter, batch, lr = 2, 2, 8, 1 / 32
    proc = launch("--np", str(ranks), SCRIPT, str(tmp_path), str(niter), str(lr), str(batch), timeout=150)
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = _simple(ranks * niter * batch, lr * niter)
    for rank in range(ranks):
        with np.load(tmp_path / f"vars.{rank}.npz") as f:
            got = {k.replace("__", "/"): f[k] for k in f.files}
        for name in ("w", "b"):
            np.testing.assert_allclose(got[name], expected[name], rtol=1e-10, err_msg=f"rank {rank} {name}")
        np.testing.assert_allclose(got["w/Momentum"], niter * expected["w/Momentum"], rtol=1e-10)
        assert got["AccumGrad/counter"] == 96 // (ranks * batch)
        np.testing.assert_array_equal(got["w/AccumGrad"], 0)  # the last step applied and cleared
