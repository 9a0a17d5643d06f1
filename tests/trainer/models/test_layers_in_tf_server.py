"""A model built from the layers, with BatchNorm, trains under the TF-server trainers: the
workers stay in step, and the BatchNorm moving averages are updated (UPDATE_OPS run by the
default callbacks) on every worker."""

from pathlib import Path

import numpy as np
import pytest

from support.launcher_run import launch

SCRIPT = str(Path(__file__).parent / "scripts" / "tf_server_bn.py")


@pytest.mark.multiprocess
@pytest.mark.timeout(180)
def test_batch_norm_model_trains_on_a_tf_server_cluster(tmp_path):
    mode = "replicated"
    proc = launch(
        "--backend", "tf-server", "--np", "2", "--ps", "1", SCRIPT, str(tmp_path), mode, timeout=150
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    workers = []
    for r in range(2):
        with np.load(tmp_path / f"vars.{r}.npz") as f:
            workers.append({k.replace("__", "/"): f[k] for k in f.files})
    for name in ("conv0/W", "bn0/gamma", "conv1/bn/beta", "fc/W"):
        np.testing.assert_allclose(workers[0][name], workers[1][name], rtol=1e-12, err_msg=name)
    for w in workers:
        assert w["global_step"] == 2 * 6
        assert not np.allclose(w["bn0/mean/EMA"], 0) and not np.allclose(w["conv1/bn/variance/EMA"], 1)
    # Each worker's averages follow its own shard of the data (with the parameter-server trainer
    # they would live on the parameter server, one set shared by the workers).
    assert not np.allclose(workers[0]["bn0/mean/EMA"], workers[1]["bn0/mean/EMA"])
