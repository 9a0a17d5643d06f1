"""benchmarks/control_plane.py, its smallest case: 64 nodes (one real node 0, 63 simulated agents on the
real protocol) and the Gloo store under 64 simulated Horovod ranks; the goals hold and the RESULT lines
are what scripts/bench.py reads."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("bench", ROOT / "scripts" / "bench.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


@pytest.mark.multiprocess
@pytest.mark.timeout(240)
def test_control_plane_benchmark_at_64_nodes():
    script = ROOT / "benchmarks" / "control_plane.py"
    argv = [sys.executable, str(script), "--quick", "--nodes", "64", "--window", "2"]
    # Its own process group, so that a timeout ends what the benchmark started too.
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=220)
    except subprocess.TimeoutExpired:
        bench.stop_group(proc)
        raise
    assert proc.returncode == 0, out[-2000:] + err[-3000:]
    results = {r["case"]: r for r in bench.parse_results(out)}
    assert set(results) == {
        *(f"{kind}_64_{what}" for kind in ("fixed", "elastic")
          for what in ("start_after_last_connect", "heartbeat_cpu", "loss_to_all_stopped", "rss_growth")),
        "elastic_64_loss_to_all_restarted",
        "gloo_store_64_rendezvous",
        "gloo_store_64_rendezvous_store_cpu",
    }  # fmt: skip
    for kind in ("fixed", "elastic"):
        for what in ("start_after_last_connect", "heartbeat_cpu", "loss_to_all_stopped"):
            r = results[f"{kind}_64_{what}"]
            assert r["ours"] >= 0 and r["ratio"] <= r["goal"], r
    assert results["gloo_store_64_rendezvous"]["ours"] > 0
