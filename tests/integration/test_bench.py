"""scripts/bench.py: the RESULT-line convention and the table it prints."""

import contextlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from support.netcluster import require_netns

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench.py"
spec = importlib.util.spec_from_file_location("bench", SCRIPT)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

RECORDS = [
    {"benchmark": "x", "case": "fast", "ours": 90.0, "baseline": 100.0, "unit": "steps/s", "ratio": 0.9},
    {"benchmark": "x", "case": "start", "ours": 2.0, "baseline": 4.0, "unit": "s", "ratio": 0.5},
]
OUTPUT = "some human-readable table\n" + "".join(
    "RESULT " + json.dumps({**r, "goal": g}) + "\n" for r, g in zip(RECORDS, [0.95, None], strict=True)
)


def test_parse_and_table():
    results = bench.parse_results(OUTPUT)
    assert [r["case"] for r in results] == ["fast", "start"]
    table = bench.format_table(results).splitlines()
    assert table[0].split() == ["benchmark", "case", "ours", "baseline", "unit", "ratio", "goal"]
    assert table[2].split() == ["x", "fast", "90", "100", "steps/s", "0.900", "0.95", "MISSED"]
    assert table[3].split() == ["x", "start", "2", "4", "s", "0.500", "-"]


def test_a_goal_that_is_not_a_number_is_an_error():
    line = 'RESULT {"benchmark": "x", "case": "c", "ours": 1, "baseline": 1, "unit": "s", "ratio": 1, '
    with pytest.raises(ValueError, match="goal must be a number or null"):
        bench.parse_results(line + '"goal": "<= 1.0"}')


def test_malformed_result_line_is_an_error():
    with pytest.raises(ValueError, match="lacks"):
        bench.parse_results('RESULT {"benchmark": "x", "case": "c"}')


def test_every_benchmark_follows_the_convention():
    # Each script in benchmarks/ must print RESULT lines (checked by reading, not by running them).
    for script in sorted(SCRIPT.parents[1].joinpath("benchmarks").glob("*.py")):
        assert '"RESULT "' in script.read_text(), f"{script.name} prints no RESULT line"


def test_unknown_benchmark_name():
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--only", "nosuch"], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2
    assert "no benchmark named nosuch" in proc.stderr


@pytest.mark.timeout(60)
def test_timeout_ends_the_benchmark_and_what_it_started(tmp_path):
    script = tmp_path / "hangs.py"
    pid_file = tmp_path / "child.pid"
    script.write_text(
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(300)\n"
    )
    results, error = bench.run_benchmark(script, quick=False, timeout=3)
    assert results == [] and error == "timed out after 3 s"
    child = int(pid_file.read_text())
    # Killed, it may still be exiting (its files are closed before it is gone): give it a moment.
    with contextlib.suppress(psutil.NoSuchProcess, psutil.TimeoutExpired):
        psutil.Process(child).wait(timeout=5)
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


@pytest.mark.timeout(480)
@pytest.mark.usefixtures("horovod_required")
def test_network_benchmark_quick_mode():
    """2 namespaced nodes on 1 Gbit/s links: the all-reduce reaches a sane share of the link."""
    require_netns()
    results, error = bench.run_benchmark(
        SCRIPT.parents[1] / "benchmarks" / "network.py", quick=True, timeout=420
    )
    assert error is None, error
    assert {r["case"] for r in results} == {
        f"{backend}_2n_1gbit_{size}mb_bus_bw" for backend in ("horovod", "tf_collective") for size in (1, 10)
    }
    for r in results:
        assert r["unit"] == "Gbit/s" and r["baseline"] == 1.0
        assert r["ratio"] > 0.3, r
