"""benchmarks/multitower.py runs end to end in its quick mode and reports every case."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "multitower.py"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_multitower_benchmark_quick_mode():
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--steps", "5"], capture_output=True, text=True, timeout=170
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert [r["case"] for r in results] == ["replicated x2 (cpu)", "ps x2 (cpu)", "async x2 (cpu)"]
    assert all(r["ours"] > 0 and r["baseline"] > 0 and r["unit"] == "samples/s" for r in results)
    assert all(r["steps_per_s"] > 0 and r["baseline_steps_per_s"] > 0 for r in results)


@pytest.mark.parametrize(
    ("gpus", "quick", "expected"),
    [
        (0, False, [2, 4]),
        (0, True, [2]),
        (1, False, [1]),
        (1, True, [1]),
        (3, False, [2]),
        (8, False, [2, 4, 8]),
    ],
)
def test_tower_counts_never_exceed_the_gpus(monkeypatch, gpus, quick, expected):
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # for its import of trainer_overhead
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")  # which it sets
    spec = importlib.util.spec_from_file_location("multitower_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.tower_counts(gpus, quick) == expected
