"""Real Horovod and real tf.train.Server clusters through the launcher."""

from __future__ import annotations

import pytest

from support.launcher_run import launch, rank_script

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]
QUIET_TF = {"TF_CPP_MIN_LOG_LEVEL": "2"}


@pytest.mark.horovod
@pytest.mark.timeout(120)
@pytest.mark.parametrize("n", [2, 3])
def test_horovod_allreduce(horovod_required, n):
    proc = launch("--np", str(n), "--no-prefix", rank_script("hvd_allreduce.py"), env=QUIET_TF, timeout=100)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = sorted(line.split()[1:] for line in proc.stdout.splitlines() if line.startswith("RESULT"))
    expected = float(n * (n + 1) / 2)
    assert results == [[str(r), str(n), "1", str(expected)] for r in range(n)]


@pytest.mark.timeout(120)
def test_tf_server_cluster_with_parameter_server():
    proc = launch(
        "--np",
        "2",
        "--backend",
        "tf-server",
        "--ps",
        "1",
        rank_script("tf_cluster.py"),
        env=QUIET_TF,
        timeout=100,
    )
    # The ps never returns from server.join(): the job ends when both workers are done, with exit code 0.
    assert proc.returncode == 0, proc.stderr[-3000:]
    totals = [line for line in proc.stdout.splitlines() if "TOTAL" in line]
    assert len(totals) == 2 and all(line.endswith("TOTAL 3.0") for line in totals), proc.stdout
    assert {line.split("]")[0].rsplit(":", 1)[1] for line in totals} == {"0", "1"}
