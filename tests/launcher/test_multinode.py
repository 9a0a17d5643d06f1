"""Several nodes: one launcher per node (127.0.0.1 and 127.0.0.2), and ssh to a real sshd on loopback."""

from __future__ import annotations

import json
import os
import signal
import socket
import time

import pytest

from support.launcher_run import assert_job_gone, finish, launch, rank_script, start_launch, wait_ready
from support.launcher_terminal import Terminal
from support.procs import free_port
from support.sshd import sshd_path, start_sshd

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(120)]
REPORT, BEHAVE, BARS = rank_script("report.py"), rank_script("behave.py"), rank_script("bars.py")
SECRET = {"TOWERPACK_LAUNCH_SECRET": "secret-of-the-multinode-tests"}
QUIET_TF = {"TF_CPP_MIN_LOG_LEVEL": "2", **SECRET}


def _node(rank: int, port: int, *args: str, addr: str | None = None, env: dict | None = None):
    extra = ["--node-addr", addr] if addr else []
    return start_launch(
        "--nnodes", "2", "--node-rank", str(rank), "--master", f"127.0.0.1:{port}", *extra, *args,
        env={**SECRET, **(env or {})},
    )  # fmt: skip


_finish = finish


@pytest.mark.horovod
def test_per_node_horovod_allreduce_across_two_hosts(horovod_required, tmp_path):
    port = free_port()
    script = rank_script("hvd_allreduce.py")
    node0 = _node(0, port, "--np", "1", script, env=QUIET_TF)
    node1 = _node(1, port, "--np", "2", script, addr="127.0.0.2", env=QUIET_TF)
    (rc0, out0, err0), (rc1, out1, err1) = _finish(node0, node1)
    assert (rc0, rc1) == (0, 0), err0[-2000:] + err1[-2000:]
    # Each node prints its own ranks' lines, prefixed with its own address.
    assert [line.split()[2:] for line in out0.splitlines() if "RESULT" in line] == [["0", "3", "2", "6.0"]]
    assert out0.startswith("[127.0.0.1:0] ")
    lines1 = sorted(line for line in out1.splitlines() if "RESULT" in line)
    assert [line.split()[:3] for line in lines1] == [
        ["[127.0.0.2:1]", "RESULT", "1"],
        ["[127.0.0.2:2]", "RESULT", "2"],
    ]
    assert_job_gone(timeout=1.0)


def test_per_node_variables(tmp_path):
    port = free_port()
    node0 = _node(0, port, "--np", "1", "--backend", "horovod", REPORT, str(tmp_path))
    node1 = _node(1, port, "--np", "2", REPORT, str(tmp_path), addr="127.0.0.2")
    (rc0, _, err0), (rc1, _, err1) = _finish(node0, node1)
    assert (rc0, rc1) == (0, 0), err0 + err1
    envs = [json.loads((tmp_path / f"env.{r}.json").read_text()) for r in range(3)]
    assert [(e["RANK"], e["LOCAL_RANK"], e["NODE_RANK"], e["LOCAL_WORLD_SIZE"]) for e in envs] == [
        ("0", "0", "0", "1"), ("1", "0", "1", "2"), ("2", "1", "1", "2"),
    ]  # fmt: skip
    assert {e["WORLD_SIZE"] for e in envs} == {"3"} and {e["MASTER_ADDR"] for e in envs} == {"127.0.0.1"}
    assert len({e["MASTER_PORT"] for e in envs}) == 1
    assert [e["HOROVOD_HOSTNAME"] for e in envs] == ["127.0.0.1", "127.0.0.2", "127.0.0.2"]
    assert [(e["HOROVOD_CROSS_RANK"], e["HOROVOD_CROSS_SIZE"]) for e in envs] == [
        ("0", "2"),
        ("1", "2"),
        ("0", "1"),
    ]
    assert len({e["HOROVOD_GLOO_RENDEZVOUS_ADDR"] for e in envs}) == 1
    assert envs[0]["HOROVOD_GLOO_RENDEZVOUS_ADDR"].startswith("127.0.0.1:")


def test_failure_on_one_node_stops_every_node(tmp_path):
    port = free_port()
    node0 = _node(0, port, "--np", "2", "--backend", "none", BEHAVE, str(tmp_path), "exit6@2", "sleep")
    node1 = _node(1, port, "--np", "1", BEHAVE, str(tmp_path), "exit6@2", "sleep", addr="127.0.0.2")
    start = time.monotonic()
    (rc0, _, err0), (rc1, _, err1) = _finish(node0, node1)
    assert time.monotonic() - start < 40
    assert (rc0, rc1) == (6, 6), err0 + err1
    assert "rank 2 on host 127.0.0.2 failed first (exit code 6)" in err0
    assert "rank 2 is failing on purpose" in err0  # the remote rank's stderr tail reached node 0
    assert_job_gone(timeout=1.0)


def test_node_1_stops_when_node_0_is_killed(tmp_path):
    port = free_port()
    node0 = _node(0, port, "--np", "1", "--backend", "none", BEHAVE, str(tmp_path), "sleep")
    node1 = _node(1, port, "--np", "1", BEHAVE, str(tmp_path), "hang", addr="127.0.0.2")
    try:
        wait_ready(tmp_path, 2)
        node0.kill()
        (rc1, _, err1), _ = _finish(node1, node0)
        assert rc1 == 1 and "lost contact with node 0" in err1
        assert_job_gone(timeout=5.0)
    finally:
        for proc in (node0, node1):
            proc.kill()
            proc.wait()


def test_losing_a_node_ends_the_job_despite_restarts(tmp_path):
    # Node 0 cannot restart processes on a node whose launcher is gone: no restart, no wait for its ranks.
    port = free_port()
    node0 = _node(
        0, port, "--np", "1", "--backend", "none", "--max-restarts", "2", BEHAVE, str(tmp_path), "sleep"
    )
    node1 = _node(1, port, "--np", "1", BEHAVE, str(tmp_path), "sleep", addr="127.0.0.2")
    try:
        wait_ready(tmp_path, 2)
        node1.kill()
        lost = time.monotonic()
        (rc0, _, err0), _ = _finish(node0, node1, timeout=30)
        assert time.monotonic() - lost < 10.0
        assert rc0 == 1, err0
        assert "restarting the job" not in err0
        cause = "its launcher's connection closed: the launcher died or its host went away"
        assert f"node 1 (127.0.0.2) failed first ({cause}); stopped the other 1 process(es)" in err0
        assert "not restarting: lost node 1 (127.0.0.2)" in err0
        assert_job_gone(timeout=5.0)
    finally:
        for proc in (node0, node1):
            proc.kill()
            proc.wait()


@pytest.fixture
def sshd(tmp_path):
    if sshd_path() is None:
        message = "sshd is not installed (scripts/system_deps.sh installs it)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    server = start_sshd(tmp_path / "sshd")
    yield server
    server.stop()


def test_ssh_mode_runs_remote_ranks_with_our_cwd_and_environment(sshd, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    proc = launch(
        "--hosts",
        "localhost:1,127.0.0.2:2",
        *sshd.client_args(),
        "--backend",
        "horovod",
        REPORT,
        str(tmp_path),
        cwd=work,
        env={"MY_SETTING": "it's carried"},
    )
    assert proc.returncode == 0, proc.stderr
    envs = [json.loads((tmp_path / f"env.{r}.json").read_text()) for r in range(3)]
    assert [(e["RANK"], e["NODE_RANK"], e["HOROVOD_HOSTNAME"]) for e in envs] == [
        ("0", "0", "127.0.0.1"), ("1", "1", "127.0.0.2"), ("2", "1", "127.0.0.2"),
    ]  # fmt: skip
    assert {e["WORLD_SIZE"] for e in envs} == {"3"}
    for rank in (1, 2):
        assert f"[127.0.0.2:{rank}] hello from rank {rank}" in proc.stdout
    # The remote side ran in our working directory, with our environment.
    (work / "probe.py").write_text("import os; print(os.getcwd()); print(os.environ['MY_SETTING'])")
    probe = launch(
        "--hosts",
        "127.0.0.2:1",
        *sshd.client_args(),
        "--no-prefix",
        "--backend",
        "none",
        "probe.py",
        cwd=work,
        env={"MY_SETTING": "it's carried"},
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.splitlines() == [str(work), "it's carried"]


def test_ssh_mode_remote_failure_and_launcher_kill(sshd, tmp_path):
    proc = launch(
        "--hosts",
        "localhost:1,127.0.0.2:1",
        *sshd.client_args(),
        "--backend",
        "none",
        BEHAVE,
        str(tmp_path),
        "exit9@1",
        "sleep",
    )
    assert proc.returncode == 9, proc.stderr
    assert "rank 1 on host 127.0.0.2 failed first (exit code 9)" in proc.stderr

    folder = tmp_path / "second"
    folder.mkdir()
    launcher = start_launch(
        "--hosts",
        "localhost:1,127.0.0.2:1",
        *sshd.client_args(),
        "--backend",
        "none",
        BEHAVE,
        str(folder),
        "hang",
    )
    try:
        wait_ready(folder, 2)
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
        # The local rank goes through the watchdog; the remote one when its agent loses node 0.
        assert_job_gone(timeout=8.0, exclude=(sshd.proc.pid,))
    finally:
        launcher.kill()
        launcher.wait()


def test_per_node_restart_restarts_every_node(tmp_path):
    port = free_port()
    resume = rank_script("resume.py")
    node0 = _node(0, port, "--np", "1", "--backend", "none", "--max-restarts", "1", resume, str(tmp_path))
    node1 = _node(1, port, "--np", "1", resume, str(tmp_path), addr="127.0.0.2")
    (rc0, _, err0), (rc1, _, err1) = _finish(node0, node1)
    assert (rc0, rc1) == (0, 0), err0 + err1
    assert "rank 1 on host 127.0.0.2 failed (exit code 7); restarting the job (restart 1 of 1)" in err0
    for rank in ("0", "1"):
        attempts = [line.split()[1] for line in (tmp_path / f"log.{rank}").read_text().splitlines()]
        assert attempts == ["0", "1"]
    assert (tmp_path / "ckpt").read_text() == "6"


def test_signal_to_a_node_launcher_reaches_every_rank_of_every_node(tmp_path):
    # Slurm or a user signals one node's launcher: every rank, on both nodes, gets that signal.
    port = free_port()
    node0 = _node(0, port, "--np", "1", "--backend", "none", BEHAVE, str(tmp_path), "trap")
    node1 = _node(1, port, "--np", "2", BEHAVE, str(tmp_path), "trap", addr="127.0.0.2")
    try:
        wait_ready(tmp_path, 3)
        node1.send_signal(signal.SIGUSR1)
        (rc0, _, err0), (rc1, _, _) = _finish(node0, node1)
        assert (rc0, rc1) == (128 + signal.SIGUSR1, 128 + signal.SIGUSR1), err0
        assert "node 1 (127.0.0.2) received SIGUSR1; passed it to every worker" in err0
        assert [(tmp_path / f"signal.{r}").read_text() for r in range(3)] == ["SIGUSR1"] * 3
        assert_job_gone(timeout=5.0)
    finally:
        for proc in (node0, node1):
            proc.kill()
            proc.wait()


def test_ssh_remote_ranks_bars_are_live_on_the_local_terminal(sshd, tmp_path):
    term = Terminal("--hosts", "127.0.0.2:2", *sshd.client_args(), "--backend", "none", BARS, str(tmp_path))
    try:
        term.wait_screen(["[127.0.0.2:0] bar 1/3"])
        (tmp_path / "go1").touch()
        term.wait_screen(["[127.0.0.2:1] rank 1 says hi", "[127.0.0.2:0] bar 2/3"])
        (tmp_path / "go2").touch()
        assert term.finish() == 0
        assert term.screen.shown()[-1] in ("[127.0.0.2:0] bar 3/3", "[127.0.0.2:1] other 1/2")
        assert_job_gone(timeout=5.0, exclude=(sshd.proc.pid,))
    finally:
        term.proc.kill()
        term.proc.wait()


def test_ssh_unknown_gpu_on_a_remote_host_is_one_line_and_exit_2(sshd, tmp_path, fake_gpus):
    # The remote agent refuses --gpus 5 (its nvidia-smi lists GPUs 0 and 1; PATH is carried over).
    args = ["--hosts", "127.0.0.2:1", *sshd.client_args(), "--gpus", "5", "--backend", "none"]
    proc = launch(*args, REPORT, str(tmp_path), env=fake_gpus)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("launch: error: on host 127.0.0.2: unknown GPU id 5"), (
        lines
    )


def test_ssh_refused_is_one_clear_line(sshd, tmp_path):
    args = sshd.client_args()
    args[args.index("--ssh-key") + 1] = str(tmp_path / "sshd" / "host_ed25519")  # a key the server refuses
    proc = launch(
        "--hosts", "localhost:1,127.0.0.2:1", *args, "--backend", "none", BEHAVE, str(tmp_path), "sleep"
    )
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("launch:")]
    assert len(lines) == 1 and "could not start the agent on 127.0.0.2 over ssh" in lines[0], proc.stderr
    assert "Permission denied" in lines[0]
    assert not list(tmp_path.glob("ready.*"))  # the local rank never started


def test_network_interface_picks_the_nodes_address_and_gloos_interface(tmp_path):
    port = free_port()
    node0 = _node(0, port, "--np", "1", "--backend", "horovod", REPORT, str(tmp_path))
    node1 = _node(1, port, "--np", "1", "--network-interface", "lo", REPORT, str(tmp_path))
    (rc0, _, err0), (rc1, _, err1) = _finish(node0, node1)
    assert (rc0, rc1) == (0, 0), err0 + err1
    env1 = json.loads((tmp_path / "env.1.json").read_text())
    assert (env1["HOROVOD_HOSTNAME"], env1["HOROVOD_GLOO_IFACE"]) == ("127.0.0.1", "lo")
    proc = launch("--np", "1", "--network-interface", "nosuch0", REPORT, str(tmp_path))
    assert proc.returncode == 2 and "no interface 'nosuch0' here (there are " in proc.stderr


def test_a_node_the_others_cannot_reach_stops_the_start_with_both_named(tmp_path):
    # Node 1 advertises an address nobody can reach (TEST-NET-1): the job does not start.
    port = free_port()
    node0 = _node(0, port, "--np", "1", "--backend", "none", BEHAVE, str(tmp_path), "ok")
    node1 = _node(1, port, "--np", "1", BEHAVE, str(tmp_path), "ok", addr="192.0.2.1")
    (rc0, _, err0), (rc1, _, _) = _finish(node0, node1)
    assert (rc0, rc1) == (1, 1), err0
    assert "node 0 (127.0.0.1) cannot reach node 1 at 192.0.2.1:" in err0
    assert "pick the address with --network-interface or --node-addr" in err0
    assert not list(tmp_path.glob("ready.*"))  # nothing started
    assert_job_gone(timeout=2.0)


def test_ipv6_master_and_nodes(tmp_path):
    with socket.socket(socket.AF_INET6) as sock:
        sock.bind(("::1", 0))
        port = sock.getsockname()[1]
    args = ["--nnodes", "2", "--master", f"[::1]:{port}", "--np", "1"]
    node0 = start_launch(
        *args, "--node-rank", "0", "--backend", "tf-server", REPORT, str(tmp_path), env=SECRET
    )
    node1 = start_launch(*args, "--node-rank", "1", REPORT, str(tmp_path), env=SECRET)
    (rc0, _, err0), (rc1, _, err1) = _finish(node0, node1)
    assert (rc0, rc1) == (0, 0), err0 + err1
    envs = [json.loads((tmp_path / f"env.{r}.json").read_text()) for r in range(2)]
    assert {e["MASTER_ADDR"] for e in envs} == {"::1"}
    workers = json.loads(envs[0]["TF_CONFIG"])["cluster"]["worker"]
    assert len(workers) == 2 and all(w.startswith("[::1]:") for w in workers), workers
