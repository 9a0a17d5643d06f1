"""A tf-keras model trained by KerasModel under the multi-process trainers, with the real `launch`:
HorovodTrainer (2 ranks over Gloo) and both TF-server trainers (2 workers, 1 parameter server)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from support.keras_models import CLASSES, MOVING, TRAINABLE, keras_data, numpy_forward
from support.launcher_run import launch

pytestmark = [pytest.mark.multiprocess]

SCRIPT = str(Path(__file__).parent / "scripts" / "keras_train.py")


def _load(out: Path, which: str, rank: int) -> dict[str, np.ndarray]:
    with np.load(out / f"{which}.{rank}.npz") as f:
        return {k.replace("__", "/"): f[k] for k in f.files}


def _xent(values: dict) -> float:
    x, y = keras_data()
    return float(-np.mean(np.sum(y * np.log(numpy_forward(values, x)), axis=1)))


def _check_ranks_trained_one_model(out: Path, ranks: int) -> list[dict]:
    before = [_load(out, "before", r) for r in range(ranks)]
    after = [_load(out, "after", r) for r in range(ranks)]
    for r in range(ranks):
        for name in TRAINABLE:
            # Every rank started from the chief's values (their own seeds differ) ...
            np.testing.assert_array_equal(before[r][name], before[0][name], err_msg=f"rank {r} {name}")
            # ... and ended with the same trained values.
            np.testing.assert_allclose(after[r][name], after[0][name], rtol=1e-6, err_msg=f"rank {r} {name}")
            assert not np.allclose(after[r][name], before[r][name]), f"rank {r} {name} did not train"
        for name in MOVING:  # each rank updated its batch-norm statistics from its own batches
            assert not np.allclose(after[r][name], before[r][name]), f"rank {r} {name}"
    # The trained model predicts well above chance (in inference mode, from its moving statistics).
    assert _xent(after[0]) < 0.85 * np.log(CLASSES)
    return after


@pytest.mark.horovod
@pytest.mark.usefixtures("horovod_required")
@pytest.mark.timeout(150)
def test_horovod_ranks_train_one_keras_model(tmp_path):
    proc = launch("--np", "2", "--backend", "horovod", SCRIPT, str(tmp_path), "horovod", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _check_ranks_trained_one_model(tmp_path, 2)


@pytest.mark.timeout(240)
def test_tf_server_workers_train_one_keras_model(tmp_path):
    args = ["--backend", "tf-server", "--np", "2", "--ps", "1"]
    for mode in ("replicated", "ps"):
        out = tmp_path / mode
        out.mkdir()
        proc = launch(*args, SCRIPT, str(out), f"tf-server-{mode}", timeout=110)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "Parameter server 0: every worker has finished" in proc.stderr
        after = _check_ranks_trained_one_model(out, 2)
        for r in range(2):
            for name in TRAINABLE:
                if mode == "replicated":  # each worker's replica holds the values of the ps copy
                    np.testing.assert_array_equal(after[r][name], after[r][f"global/{name}"], err_msg=name)
                else:  # one set of variables, on the parameter server
                    assert f"global/{name}" not in after[r]
