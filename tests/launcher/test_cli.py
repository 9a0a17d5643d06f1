"""Bad input: one clear line on stderr and exit code 2, before any process starts. Plus parsing details."""

from __future__ import annotations

import dataclasses
import socket
import sys

import pytest

from support.launcher_run import launch, rank_script
from towerpack.launcher import gpus
from towerpack.launcher.cli import parse
from towerpack.launcher.errors import UsageError
from towerpack.launcher.hosts import parse_hostfile, parse_hosts
from towerpack.launcher.spec import Mode, Role
from towerpack.utils.hostlist import HostListError, expand_nodelist

REPORT = rank_script("report.py")


def _one_error_line(proc, *words):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("launch: error: ")
    for word in words:
        assert word in lines[0]
    assert proc.stdout == ""


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--np", "2", "missing_script.py"], ["missing_script.py", "not found"]),
        (["--np", "2", "-m", "no_such_module_xyz"], ["no_such_module_xyz"]),
        (["--hosts", "a:4,,b:4", REPORT], ["malformed host list"]),
        (["--hosts", "a:four", REPORT], ["slot count", "four"]),
        (["--hosts", "a:2,a:2", REPORT], ["twice"]),
        (["--np", "0", REPORT], ["--np"]),
        (["--np", "2", "--ps", "1", "--backend", "horovod", REPORT], ["--ps needs --backend tf-server"]),
        (["--np", "2", "--backend", "mpi", REPORT], ["mpi"]),
        ([REPORT], ["--np N"]),
        (["--nnodes", "2", "--np", "1", REPORT], ["--node-rank", "--master"]),
        (
            ["--nnodes", "2", "--node-rank", "2", "--master", "127.0.0.1:1", "--np", "1", REPORT],
            ["--node-rank"],
        ),
        (["--np", "2", "--ranks", "zero", REPORT], ["--ranks"]),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, words):
    _one_error_line(launch(*args), *words)


def test_busy_explicit_port_is_refused():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        _one_error_line(launch("--np", "1", "--master-port", str(port), REPORT, "."), str(port), "in use")
        _one_error_line(
            launch(
                "--nnodes", "2", "--node-rank", "0", "--master", f"127.0.0.1:{port}", "--np", "1", REPORT, "."
            ),
            str(port),
            "in use",
        )


def test_gpus_without_nvidia_smi(tmp_path):
    _one_error_line(launch("--gpus", "all", REPORT, env={"PATH": str(tmp_path)}), "no NVIDIA GPU")


def test_unknown_gpu_id(fake_gpus):
    _one_error_line(launch("--gpus", "0,5", REPORT, env=fake_gpus), "unknown GPU id 5", "0, 1")


def test_gpu_ids_index_into_an_inherited_cuda_visible_devices(fake_gpus):
    # Under a scheduler that only sets CUDA_VISIBLE_DEVICES, ranks must stay on the allocated devices.
    env = dict(fake_gpus, CUDA_VISIBLE_DEVICES="1")
    assert gpus.select("all", env) == ["1"]
    assert gpus.select("0", env) == ["1"]
    assert gpus.select("1,0", dict(fake_gpus, CUDA_VISIBLE_DEVICES="GPU-aaaa, GPU-bbbb")) == [
        "GPU-bbbb",
        "GPU-aaaa",
    ]
    assert gpus.select("all", fake_gpus) == ["0", "1"]  # not set: every GPU nvidia-smi lists
    with pytest.raises(UsageError, match=r"unknown GPU id 1 \(CUDA_VISIBLE_DEVICES=1 makes GPUs 0 visible\)"):
        gpus.select("0,1", env)
    with pytest.raises(UsageError, match="empty"):
        gpus.select("all", dict(fake_gpus, CUDA_VISIBLE_DEVICES=""))
    _one_error_line(launch("--gpus", "0,1", REPORT, env=env), "unknown GPU id 1", "CUDA_VISIBLE_DEVICES=1")


def test_unknown_second_host_is_one_line_and_exit_2():
    _one_error_line(launch("--hosts", "127.0.0.2:1,no-such-host.invalid:1", REPORT), "no-such-host.invalid")


def test_malformed_hostfile(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("a slots=2\nb slots=two\n")
    _one_error_line(launch("--hostfile", str(hostfile), REPORT), "line 2")


def test_host_lists():
    assert [(h.host, h.slots) for h in parse_hosts("a:4,b:2,c")] == [("a", 4), ("b", 2), ("c", 1)]
    assert [(h.host, h.slots) for h in parse_hosts("[::1]:2")] == [("::1", 2)]


def test_slurm_node_lists():
    assert expand_nodelist("gpu[01-03,7],login5,x[9-10]") == [
        "gpu01", "gpu02", "gpu03", "gpu7", "login5", "x9", "x10",
    ]  # fmt: skip
    # Several bracket groups in one name: every combination, the first group outermost.
    assert expand_nodelist("rack[1-2]-n[01-02],db[7]") == [
        "rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02", "db7",
    ]  # fmt: skip
    assert expand_nodelist("a[1,3]b[0-1]c") == ["a1b0c", "a1b1c", "a3b0c", "a3b1c"]
    for bad in ("n[1-", "n[a-b]", "n[3-1]", "a,,b", "n[1]]"):
        with pytest.raises(HostListError, match="Slurm node list"):
            expand_nodelist(bad)


def test_hostfile(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("# cluster\nnode1 slots=4\n\nnode2 slots=2 max_slots=8  # comment\nnode3\n")
    assert [(h.host, h.slots) for h in parse_hostfile(str(path))] == [
        ("node1", 4),
        ("node2", 2),
        ("node3", 1),
    ]


STEP = {  # srun on the 2 nodes of a 2-node job, this task on the second node
    "SLURM_JOB_NUM_NODES": "2",
    "SLURM_NNODES": "2",
    "SLURM_JOB_NODELIST": "127.0.0.[1-2]",
    "SLURM_STEP_NODELIST": "127.0.0.[1-2]",
    "SLURM_STEP_NUM_NODES": "2",
    "SLURM_STEP_NUM_TASKS": "2",
    "SLURM_NODEID": "1",
    "SLURM_JOB_ID": "4242",
    "TOWERPACK_LAUNCH_SECRET": "x" * 32,
}


def test_an_srun_step_on_several_nodes_selects_per_node_mode():
    spec = parse(["--np", "2", REPORT], env=STEP)
    assert (spec.mode, spec.role, spec.nnodes, spec.node_rank) == (Mode.NODE, Role.AGENT, 2, 1)
    assert (spec.master_addr, spec.master_port, spec.node_addr) == (
        "127.0.0.1",
        29400 + 4242 % 1000,
        "127.0.0.2",
    )
    assert spec.job_id == "slurm4242" and spec.secret == b"x" * 32
    # Explicit flags win over Slurm's variables; --no-slurm ignores them.
    spec = parse(
        ["--nnodes", "3", "--node-rank", "2", "--master", "127.0.0.1:2000", "--np", "1", REPORT], env=STEP
    )
    assert (spec.nnodes, spec.node_rank, spec.master_port) == (3, 2, 2000)
    assert parse(["--no-slurm", "--np", "2", REPORT], env=STEP).mode is Mode.SINGLE


def test_np_alone_never_joins_a_multi_node_allocation_by_surprise():
    # The batch script of a 2-node job (no srun step): this node only, with a note saying so.
    batch = {k: v for k, v in STEP.items() if not k.startswith("SLURM_STEP")}
    spec = parse(["--np", "2", REPORT], env=batch)
    assert spec.mode is Mode.SINGLE and "srun --ntasks-per-node=1" in spec.note
    assert parse(["--no-slurm", "--np", "2", REPORT], env=batch).note is None
    # A one-node step is one machine; two launchers per node is refused with what to do instead.
    one_node = dict(STEP, SLURM_STEP_NODELIST="127.0.0.1", SLURM_STEP_NUM_NODES="1", SLURM_NODEID="0")
    assert parse(["--np", "2", REPORT], env=one_node).mode is Mode.SINGLE
    with pytest.raises(UsageError, match="srun --ntasks-per-node=1"):
        parse(["--np", "2", REPORT], env=dict(STEP, SLURM_STEP_NUM_TASKS="4"))


def test_slurm_step_variables_win_over_the_job_ones():
    # A step on nodes 3 and 4 of a five-node job: node ids and the master come from the step.
    env = dict(
        STEP,
        SLURM_NNODES="5",
        SLURM_JOB_NODELIST="127.0.0.[1-5]",
        SLURM_STEP_NODELIST="127.0.0.[3-4]",
        SLURM_JOB_ID="7",
    )
    spec = parse(["--np", "1", REPORT], env=env)
    assert (spec.nnodes, spec.node_rank, spec.master_addr, spec.node_addr) == (2, 1, "127.0.0.3", "127.0.0.4")


def test_master_addresses_ipv4_ipv6_and_names():
    base = ["--nnodes", "2", "--node-rank", "1", "--np", "1", "--backend", "none"]
    env = {"TOWERPACK_LAUNCH_SECRET": "s" * 20}
    for master, addr, port in [
        ("127.0.0.1:2000", "127.0.0.1", 2000),
        ("127.0.0.1", "127.0.0.1", 29400),
        ("[::1]:2000", "::1", 2000),
        ("[::1]", "::1", 29400),
        ("::1", "::1", 29400),
        ("localhost:2001", "127.0.0.1", 2001),
    ]:
        spec = parse([*base, "--master", master, REPORT], env=env)
        assert (spec.master_addr, spec.master_port) == (addr, port), master
    for bad in ("[::1]x", "host:99999", ":80", "[::1]:port"):
        with pytest.raises(UsageError, match="--master expects"):
            parse([*base, "--master", bad, REPORT], env=env)
    # Node 0's backend is the job's: Horovod cannot use an IPv6 master.
    node0 = ["--nnodes", "2", "--node-rank", "0", "--np", "1", "--backend", "horovod"]
    with pytest.raises(UsageError, match="IPv6"):
        parse([*node0, "--master", "[::1]:2000", REPORT], env=env)


def test_script_arguments_pass_through_untouched():
    spec = parse(["--np", "2", REPORT, "--np", "7", "-m", "--", "x"], env={})
    assert spec.argv == (sys.executable, "-u", REPORT, "--np", "7", "-m", "--", "x")
    spec = parse(["--np", "1", "-m", "json.tool", "--sort-keys"], env={})
    assert spec.argv == (sys.executable, "-u", "-m", "json.tool", "--sort-keys")
    # A "--" right after the script is the script's; one before the script is the launcher's.
    assert parse(["--np", "2", REPORT, "--", "x"], env={}).argv == (sys.executable, "-u", REPORT, "--", "x")
    spec = parse(["--np", "2", "--", REPORT, "--", "x"], env={})
    assert spec.argv == (sys.executable, "-u", REPORT, "--", "x")
    assert spec.target == ("--", REPORT, "--", "x")  # what a remote agent is given, parsed the same way
    assert parse(["--np", "2", *spec.target], env={}).argv == spec.argv
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.slots = 3  # a finished spec
    with pytest.raises(UsageError):
        parse(["--np", "1", "--hosts", "a:1", REPORT], env={})


def test_secret_file_for_per_node_mode(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("a-secret-from-a-file\n")
    secret.chmod(0o600)
    args = ["--nnodes", "2", "--node-rank", "1", "--master", "127.0.0.1:2000", "--np", "1", REPORT]
    assert parse(["--secret-file", str(secret), *args], env={}).secret == b"a-secret-from-a-file"
    # The variable wins over the file; a file others may read, or a short secret, is refused.
    env = {"TOWERPACK_LAUNCH_SECRET": "from-the-environment"}
    assert parse(["--secret-file", str(secret), *args], env=env).secret == b"from-the-environment"
    secret.chmod(0o640)
    with pytest.raises(UsageError, match="chmod 600"):
        parse(["--secret-file", str(secret), *args], env={})
    with pytest.raises(UsageError, match="at least 16 characters"):
        parse(args, env={"TOWERPACK_LAUNCH_SECRET": "short"})
