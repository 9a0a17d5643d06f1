"""Per-rank resources: each rank's TensorFlow sizes its thread pools to its share of the node's cores
(unless the user set the variables), and --cpu-bind pins each rank to its own cores."""

from __future__ import annotations

import json
import os

import pytest

from support.launcher_run import launch, rank_script

pytestmark = [pytest.mark.multiprocess]


def _cores_per_rank(count: int) -> list[list[int]]:
    cores = sorted(os.sched_getaffinity(0))
    per = len(cores) // count
    return [cores[i * per : (i + 1) * per] for i in range(count)] if per else [[c] for c in cores[:count]]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_tensorflow_in_each_rank_uses_its_share_of_the_cores_and_cpu_bind_pins_it(tmp_path):
    proc = launch(
        "--np", "2", "--backend", "none", "--cpu-bind", rank_script("threads.py"), str(tmp_path),
        env={"TF_CPP_MIN_LOG_LEVEL": "2"}, timeout=110,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank, cores in enumerate(_cores_per_rank(2)):
        seen = json.loads((tmp_path / f"threads.{rank}.json").read_text())
        share = len(cores)
        # The pools TensorFlow really made, not only the variables.
        assert (seen["intra"], seen["inter"]) == (share, max(share, 2)), seen
        assert seen["env"]["OMP_NUM_THREADS"] == str(share)
        assert seen["affinity"] == seen["thread_affinity"] == cores


def test_thread_variables_the_user_set_are_kept(tmp_path):
    user = {"TF_NUM_INTRAOP_THREADS": "3", "OMP_NUM_THREADS": "5"}
    proc = launch("--np", "2", "--backend", "none", rank_script("report.py"), str(tmp_path), env=user)
    assert proc.returncode == 0, proc.stderr
    share = len(_cores_per_rank(2)[0])
    for rank in range(2):
        env = json.loads((tmp_path / f"env.{rank}.json").read_text())
        assert (env["TF_NUM_INTRAOP_THREADS"], env["OMP_NUM_THREADS"]) == ("3", "5")
        assert env["TF_NUM_INTEROP_THREADS"] == str(max(share, 2))
