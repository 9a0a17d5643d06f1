"""One machine: rank variables, GPUs, output prefixes and filters, log files, modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.launcher_run import launch, rank_script

pytestmark = pytest.mark.multiprocess
REPORT = rank_script("report.py")


def _envs(folder, count):
    return [json.loads((folder / f"env.{r}.json").read_text()) for r in range(count)]


def test_cpu_ranks_get_the_common_variables(tmp_path):
    proc = launch("--np", "3", "--backend", "none", REPORT, str(tmp_path), "--lr", "0.1")
    assert proc.returncode == 0, proc.stderr
    envs = _envs(tmp_path, 3)
    ports = {e["MASTER_PORT"] for e in envs}
    assert len(ports) == 1 and int(ports.pop()) > 0
    for rank, env in enumerate(envs):
        assert (env["RANK"], env["LOCAL_RANK"]) == (str(rank), str(rank))
        assert (env["WORLD_SIZE"], env["LOCAL_WORLD_SIZE"], env["NODE_RANK"]) == ("3", "3", "0")
        assert (env["MASTER_ADDR"], env["RESTART_COUNT"], env["PYTHONUNBUFFERED"]) == ("127.0.0.1", "0", "1")
        assert env["CUDA_VISIBLE_DEVICES"] == ""  # --np means CPU processes
        assert env["argv"] == ["--lr", "0.1"]
        assert env["TF_CONFIG"] is None and not any(k.startswith("HOROVOD_") for k in env)


def test_one_process_per_gpu(tmp_path, fake_gpus):
    proc = launch("--gpus", "1,0", "--backend", "none", REPORT, str(tmp_path), env=fake_gpus)
    assert proc.returncode == 0, proc.stderr
    assert [e["CUDA_VISIBLE_DEVICES"] for e in _envs(tmp_path, 2)] == ["1", "0"]
    (tmp_path / "all").mkdir()
    proc = launch("--gpus", "all", "--backend", "none", REPORT, str(tmp_path / "all"), env=fake_gpus)
    assert proc.returncode == 0, proc.stderr
    assert [e["CUDA_VISIBLE_DEVICES"] for e in _envs(tmp_path / "all", 2)] == ["0", "1"]


def test_horovod_variables(tmp_path):
    proc = launch("--np", "2", "--backend", "horovod", REPORT, str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    e0, e1 = _envs(tmp_path, 2)
    for rank, env in enumerate((e0, e1)):
        assert env["HOROVOD_RANK"] == env["HOROVOD_LOCAL_RANK"] == str(rank)
        assert env["HOROVOD_SIZE"] == env["HOROVOD_LOCAL_SIZE"] == "2"
        assert (env["HOROVOD_CROSS_RANK"], env["HOROVOD_CROSS_SIZE"]) == ("0", "1")
        assert env["HOROVOD_CONTROLLER"] == env["HOROVOD_CPU_OPERATIONS"] == "gloo"
        port = env["HOROVOD_GLOO_RENDEZVOUS_PORT"]
        # Horovod reaches the store at 127.0.0.1:port; the path after it carries the job's token.
        assert env["HOROVOD_GLOO_RENDEZVOUS_ADDR"].startswith(f"127.0.0.1:{port}/")
        assert env["HOROVOD_GLOO_IFACE"] == "lo"
    assert e0["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == e1["HOROVOD_GLOO_RENDEZVOUS_ADDR"]


def test_tf_config_for_workers_and_parameter_servers(tmp_path):
    # report.py exits at once, parameter servers included; a ps that ends with 0 is no failure.
    proc = launch("--np", "2", "--backend", "tf-server", "--ps", "1", "--ranks", "0,1", REPORT, str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "hello from rank ps0" not in proc.stdout  # filtered out
    configs = [json.loads(e["TF_CONFIG"]) for e in _envs(tmp_path, 2)]
    cluster = configs[0]["cluster"]
    assert all(c["cluster"] == cluster for c in configs)
    assert len(cluster["worker"]) == 2 and len(cluster["ps"]) == 1
    assert len(set(cluster["worker"] + cluster["ps"])) == 3  # distinct ports
    assert [c["task"] for c in configs] == [{"type": "worker", "index": 0}, {"type": "worker", "index": 1}]
    if (tmp_path / "env.ps0.json").exists():  # the ps may be stopped before it gets that far
        ps = json.loads((tmp_path / "env.ps0.json").read_text())
        assert json.loads(ps["TF_CONFIG"]) == {"cluster": cluster, "task": {"type": "ps", "index": 0}}
        assert ps["RANK"] is None and ps["CUDA_VISIBLE_DEVICES"] == ""


def test_output_prefix_filter_and_log_files(tmp_path):
    logs = tmp_path / "logs"
    proc = launch("--np", "3", "--backend", "none", "--log-dir", str(logs), REPORT, str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    for rank in range(3):
        assert f"] hello from rank {rank}\n" in proc.stdout
        assert f"] note from rank {rank}\n" in proc.stderr
        assert (logs / f"rank.{rank}" / "stdout").read_text() == f"hello from rank {rank}\n"
        assert (logs / f"rank.{rank}" / "stderr").read_text() == f"note from rank {rank}\n"
    lines = proc.stdout.splitlines()
    assert all(line.startswith("[") and ":" in line.split("]")[0] for line in lines)
    assert sorted(line.split("]")[0].rsplit(":", 1)[1] for line in lines) == ["0", "1", "2"]

    proc = launch("--np", "3", "--backend", "none", "--no-prefix", "--ranks", "1", REPORT, str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "hello from rank 1\n"
    assert proc.stderr == "note from rank 1\n"


def test_module_and_python_dash_m(tmp_path):
    proc = launch("--np", "2", "--backend", "none", "--no-prefix", "-m", "json.tool", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("usage:") == 2
    # The console script and `python -m towerpack.launcher` are the same command.
    exe = Path(sys.executable).parent / "launch"
    proc = subprocess.run(
        [str(exe), "--np", "1", "--backend", "none", REPORT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and "hello from rank 0" in proc.stdout


def test_launcher_never_imports_tensorflow():
    code = (
        "import sys; from towerpack.launcher import cli, coordinator, agent, gloo_store;"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'horovod', 'keras')];"
        "print(bad); sys.exit(bool(bad))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
