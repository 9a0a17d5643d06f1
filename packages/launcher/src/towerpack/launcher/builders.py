"""From parsed arguments to a finished ``LaunchSpec``: one builder per mode, plus the checks they share.

``build`` picks the mode: ``--hosts``/``--hostfile`` (ssh), the hidden arguments of an agent started
over ssh, per-node flags or an ``srun`` step (one launcher per node), else one machine. Every check
that can fail raises a UsageError (one line, exit code 2) before anything starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import shutil
import sys
import uuid

from towerpack.launcher import gpus as gpu_list
from towerpack.launcher import job_secret, net, slurm
from towerpack.launcher.console import Bars
from towerpack.launcher.errors import UsageError
from towerpack.launcher.hosts import HostSlots, parse_hostfile, parse_hosts
from towerpack.launcher.membership import RENDEZVOUS_TIMEOUT_S, NodeRange, ResizeMode
from towerpack.launcher.output import OutputOptions
from towerpack.launcher.plan import Backend
from towerpack.launcher.ports import check_port
from towerpack.launcher.protocol import HEARTBEAT_INTERVAL_S
from towerpack.launcher.spec import LaunchSpec, Mode, Role, SshOptions
from towerpack.launcher.tasks import TaskId


def build(a: argparse.Namespace, env: dict) -> LaunchSpec:
    a = _with_node_range(a)
    common = _common(a, env)
    if a.master and "," in a.master and a.elastic is None:
        raise UsageError("--master lists several addresses only in elastic jobs (--nnodes MIN:MAX)")
    if a.hosts or a.hostfile:
        return ssh_mode(a, env, common)
    if a.agent_slots is not None:
        return ssh_agent(a, env, common)
    explicit = a.nnodes is not None or a.node_rank is not None or a.master is not None
    step = None if explicit or a.no_slurm else slurm.step(env)
    if explicit or step:
        return node_mode(a, env, common, step)
    return single(a, env, common)


# -- the modes ---------------------------------------------------------------------------------------
def single(a: argparse.Namespace, env: dict, common: dict) -> LaunchSpec:
    """Every process on this machine."""
    slots, cuda = _local_processes(a, env)
    addr = net.iface_address(a.network_interface) if a.network_interface else "127.0.0.1"
    if common["rank_master_port"] is not None:
        check_port(addr, common["rank_master_port"], "--master-port")
    note = None if a.no_slurm else slurm.allocation_note(env)
    return LaunchSpec(
        mode=Mode.SINGLE, role=Role.COORDINATOR, slots=slots, cuda=cuda, master_addr=addr,
        iface=a.network_interface, secret=job_secret.new(), note=note, **common,
    )  # fmt: skip


def ssh_mode(a: argparse.Namespace, env: dict, common: dict) -> LaunchSpec:
    """This launcher coordinates; every other host runs an agent started over ssh."""
    if a.hosts and a.hostfile:
        raise UsageError("give --hosts or --hostfile, not both")
    hosts = parse_hosts(a.hosts) if a.hosts else parse_hostfile(a.hostfile)
    if a.np is not None:
        raise UsageError("--np cannot be combined with --hosts/--hostfile (the slots give the process count)")
    if a.nnodes is not None or a.node_rank is not None:
        raise UsageError("--hosts/--hostfile start every node over ssh; leave out --nnodes/--node-rank")
    if a.rendezvous_timeout != RENDEZVOUS_TIMEOUT_S:
        raise UsageError("--rendezvous-timeout is for elastic jobs (--nnodes MIN:MAX)")
    for h in hosts:
        net.resolve(h.host)  # a typo in any host name: one clear line now, not an ssh failure later
    local = any(net.is_local(h.host) for h in hosts)
    cuda = tuple(gpu_list.select(a.gpus, env)) if a.gpus is not None and local else None
    master_addr, master_port = _ssh_master(hosts, a.master)
    _check_backend_address(common["backend"], master_addr)
    node_addr = net.iface_address(a.network_interface) if a.network_interface else None
    return LaunchSpec(
        mode=Mode.SSH, role=Role.COORDINATOR, hosts=tuple(hosts), nnodes=len(hosts), cuda=cuda,
        gpus=a.gpus, master_addr=master_addr, master_port=master_port, node_addr=node_addr,
        iface=a.network_interface, secret=job_secret.new(), **common,
    )  # fmt: skip


def node_mode(a: argparse.Namespace, env: dict, common: dict, step: slurm.SlurmStep | None) -> LaunchSpec:
    """One launcher per node: node 0 coordinates, the others are its agents."""
    if a.elastic is not None:
        return elastic_node(a, env, common)
    if a.rendezvous_timeout != RENDEZVOUS_TIMEOUT_S:
        raise UsageError("--rendezvous-timeout is for elastic jobs (--nnodes MIN:MAX)")
    if step is not None:
        nnodes, node_rank, node_addr = step.nnodes, step.node_rank, step.nodes[step.node_rank]
        master_host, master_port = step.nodes[0], step.master_port
        common["job_id"] = a.job_id or f"slurm{step.job_id}"
    else:
        if a.nnodes is None or a.node_rank is None or a.master is None:
            raise UsageError("per-node mode needs all of --nnodes, --node-rank and --master ADDR:PORT")
        nnodes, node_rank, node_addr = a.nnodes, a.node_rank, None
        master_host, master_port = net.split_host_port(a.master, net.DEFAULT_MASTER_PORT, "--master")
    if not 0 <= node_rank < nnodes:
        raise UsageError(f"--node-rank must be in 0..{nnodes - 1}, got {node_rank}")
    slots, cuda = _local_processes(a, env)
    master_addr = net.resolve(master_host)
    if a.network_interface:
        node_addr = net.iface_address(a.network_interface)
    role = Role.COORDINATOR if node_rank == 0 else Role.AGENT
    if role is Role.COORDINATOR:  # node 0's backend and ports are the job's
        _check_backend_address(common["backend"], master_addr)
        check_port(master_addr, master_port, "--master port")
        if common["rank_master_port"] is not None:
            check_port(master_addr, common["rank_master_port"], "--master-port")
    return LaunchSpec(
        mode=Mode.NODE, role=role, slots=slots, cuda=cuda, nnodes=nnodes, node_rank=node_rank,
        master_addr=master_addr, master_port=master_port, node_addr=a.node_addr or node_addr,
        iface=a.network_interface, secret=job_secret.for_node_mode(env, a.secret_file), **common,
    )  # fmt: skip


def elastic_node(a: argparse.Namespace, env: dict, common: dict) -> LaunchSpec:
    """``--nnodes MIN:MAX``: node 0 coordinates (the first ``--master`` address; the others are nodes a
    joining launcher may ask, once node 0 may be gone); any other launcher may join (or leave) at any
    time and gets its node rank at each rendezvous."""
    if a.master is None:
        raise UsageError("--nnodes MIN:MAX needs --master ADDR:PORT (where node 0 coordinates)")
    masters = tuple(
        (net.resolve(host), port)
        for host, port in (
            net.split_host_port(m.strip(), net.DEFAULT_MASTER_PORT, "--master") for m in a.master.split(",")
        )
    )
    if a.node_rank is not None and a.node_rank < 0:
        raise UsageError(f"--node-rank must not be negative, got {a.node_rank}")
    if a.rendezvous_timeout <= 0:
        raise UsageError("--rendezvous-timeout must be positive")
    master_addr, master_port = masters[0]
    slots, cuda = _local_processes(a, env)
    node_addr = net.iface_address(a.network_interface) if a.network_interface else a.node_addr
    # Node 0 is the launcher told so, or (no --node-rank) the one on the machine --master names.
    first = a.node_rank == 0 if a.node_rank is not None else net.is_local(master_addr)
    if first:
        _check_backend_address(common["backend"], master_addr)
        hint = "pick another or leave it out"
        if a.node_rank is None:
            hint = (
                "another launcher on this machine is probably node 0 already. Without --node-rank, every "
                "launcher on the machine that --master names takes itself for node 0: started on one "
                "machine, pass --node-rank 0 to the first launcher and --node-rank 1 (2, ...) to the others"
            )
        check_port(master_addr, master_port, "--master port", hint)
        if common["rank_master_port"] is not None:
            check_port(master_addr, common["rank_master_port"], "--master-port")
    return LaunchSpec(
        mode=Mode.NODE, role=Role.COORDINATOR if first else Role.AGENT, slots=slots, cuda=cuda,
        nnodes=a.elastic.max_nodes, elastic=a.elastic, rendezvous_timeout=a.rendezvous_timeout,
        resize=ResizeMode(a.resize),
        master_addr=master_addr, master_port=master_port, masters=masters, node_addr=node_addr,
        iface=a.network_interface, secret=job_secret.for_node_mode(env, a.secret_file), **common,
    )  # fmt: skip


def ssh_agent(a: argparse.Namespace, env: dict, common: dict) -> LaunchSpec:
    """An agent that a coordinator started over ssh (hidden arguments; the secret comes on stdin)."""
    if a.nnodes is None or a.node_rank is None or a.master is None:
        raise UsageError("an agent needs --nnodes, --node-rank and --master")
    cuda = None
    if a.gpus is not None:
        ids = gpu_list.select(a.gpus, env)
        if len(ids) < a.agent_slots:
            raise UsageError(f"this host has {a.agent_slots} slots but --gpus gives only {len(ids)} GPU(s)")
        cuda = tuple(ids[: a.agent_slots])
    master_host, master_port = net.split_host_port(a.master, net.DEFAULT_MASTER_PORT, "--master")
    node_addr = net.iface_address(a.network_interface) if a.network_interface else a.node_addr
    common["output"] = dataclasses.replace(common["output"], bars=Bars.RELAY)
    return LaunchSpec(
        mode=Mode.NODE, role=Role.AGENT, slots=a.agent_slots, cuda=cuda, gpus=a.gpus, nnodes=a.nnodes,
        node_rank=a.node_rank, master_addr=net.resolve(master_host), master_port=master_port,
        node_addr=node_addr, iface=a.network_interface, via_ssh=True, secret=_secret_from_stdin(), **common,
    )  # fmt: skip


# -- shared parts --------------------------------------------------------------------------------------
def _with_node_range(a: argparse.Namespace) -> argparse.Namespace:
    """``--nnodes`` as a number (MAX when elastic) and ``elastic``: the MIN:MAX range or None."""
    elastic = NodeRange.parse(a.nnodes) if a.nnodes is not None else None
    if a.nnodes is None or elastic is not None:
        nnodes = elastic.max_nodes if elastic else None
    else:
        nnodes = int(a.nnodes)
    return argparse.Namespace(**{**vars(a), "nnodes": nnodes, "elastic": elastic})


def _common(a: argparse.Namespace, env: dict) -> dict:
    """The fields every mode fills the same way."""
    # A "--" before the script ends the launcher's options; everything after the script is the script's.
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        raise UsageError("give the script to run (or a module with -m)")
    _positive("--np", a.np)
    _positive("--ps", a.ps, 0)
    _positive("--max-restarts", a.max_restarts, 0)
    _positive("--nnodes", a.nnodes)
    if a.start_timeout <= 0:
        raise UsageError("--start-timeout must be positive")
    if a.heartbeat_timeout < 2 * HEARTBEAT_INTERVAL_S:
        raise UsageError(f"--heartbeat-timeout must be at least {2 * HEARTBEAT_INTERVAL_S:g} s")
    if a.grace_period < 0:
        raise UsageError("--grace-period must not be negative")
    if a.master_port is not None and not 0 < a.master_port < 65536:
        raise UsageError(f"--master-port must be a port number, got {a.master_port}")
    argv, target = _target(command[0], command[1:], a.module, a.no_python)
    if a.backend:
        backend = Backend(a.backend)
    else:
        backend = _default_backend()
    if a.ps and backend is not Backend.TF_SERVER:
        why = "the collective all-reduce has no parameter servers" if backend is Backend.TF_COLLECTIVE else ""
        raise UsageError(
            f"--ps needs --backend tf-server, got --backend {backend.value}" + (f": {why}" if why else "")
        )
    ranks = _ranks(a.ranks) if a.ranks else None
    return {
        "argv": tuple(argv),
        "target": tuple(target),
        "backend": backend,
        "job_id": a.job_id or uuid.uuid4().hex[:12],
        "n_ps": a.ps,
        "max_restarts": a.max_restarts,
        "rank_master_port": a.master_port,
        "output": OutputOptions(prefix=not a.no_prefix, ranks=ranks, log_dir=a.log_dir, bars=Bars(a.bars)),
        "ssh": SshOptions(a.ssh_port, a.ssh_key, tuple(a.ssh_option)),
        "start_timeout": a.start_timeout,
        "heartbeat_timeout": a.heartbeat_timeout,
        "grace_period": a.grace_period,
        "error_file": os.path.abspath(a.error_file) if a.error_file else None,
        "cpu_bind": a.cpu_bind,
    }


def _target(script: str, args: list[str], module: bool, no_python: bool) -> tuple[list[str], list[str]]:
    """(what each task runs, the user's command for remote agents)."""
    flags = (["-m"] if module else []) + (["--no-python"] if no_python else [])
    target = [*flags, "--", script, *args]  # "--": a script named like an option stays the script
    if module:
        if no_python:
            raise UsageError("-m and --no-python cannot be combined")
        if importlib.util.find_spec(script.split(".")[0]) is None:
            raise UsageError(f"module {script!r} not found")
        return [sys.executable, "-u", "-m", script, *args], target
    if no_python:
        exe = script if os.sep in script else shutil.which(script)
        if not exe or not os.access(exe, os.X_OK):
            raise UsageError(f"executable {script!r} not found")
        return [script, *args], target
    if not os.path.isfile(script):
        raise UsageError(f"script {script!r} not found")
    return [sys.executable, "-u", script, *args], target


def _local_processes(a: argparse.Namespace, env: dict) -> tuple[int, tuple[str, ...] | None]:
    """(worker processes on this node, CUDA_VISIBLE_DEVICES of each or None) from --np / --gpus."""
    if a.np is not None and a.gpus is not None:
        raise UsageError("give --np (CPU processes) or --gpus (one process per GPU), not both")
    if a.gpus is not None:
        ids = gpu_list.select(a.gpus, env)
        return len(ids), tuple(ids)
    if a.np is not None:
        return a.np, ("",) * a.np
    raise UsageError("say how many processes: --np N, --gpus LIST, --hosts or --hostfile")


def _ranks(text: str) -> frozenset[TaskId]:
    """``--ranks 0,2,ps0``: the tasks whose output is shown."""
    try:
        return frozenset(TaskId.parse(r.strip()) for r in text.split(","))
    except ValueError:
        raise UsageError(f"--ranks expects ranks like 0,2 or ps0, got {text!r}") from None


def _positive(name: str, value: int | None, minimum: int = 1) -> None:
    if value is not None and value < minimum:
        raise UsageError(f"{name} must be at least {minimum}, got {value}")


def _ssh_master(hosts: list[HostSlots], master: str | None) -> tuple[str, int | None]:
    if master:
        host, port = net.split_host_port(master, None, "--master")
        return net.resolve(host), port
    remote = [h.host for h in hosts if not net.is_local(h.host)]
    return (net.source_address(remote[0]) if remote else "127.0.0.1"), None


def _check_backend_address(backend: Backend, addr: str) -> None:
    if backend is Backend.HOROVOD and ":" in addr:
        raise UsageError(
            f"Horovod's rendezvous client cannot reach the IPv6 address {addr}: give --master an IPv4 "
            "address (or a name that resolves to one), or use --backend tf-server, tf-collective or none"
        )


def _secret_from_stdin() -> bytes:
    """The first line of stdin, read without buffering what follows (stdin then only signals EOF)."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(0, 1)
        if not chunk:
            break
        line += chunk
    if len(line.strip()) < job_secret.MIN_LENGTH:
        raise UsageError("an agent started over ssh expects the job secret on its standard input")
    return line.strip()


def _default_backend() -> Backend:
    """Horovod where it is installed; else TensorFlow's collective all-reduce (the trainer's
    ``default_trainer`` follows it), or only the common variables without TensorFlow either."""
    try:
        horovod = importlib.util.find_spec("horovod.tensorflow") is not None  # imports horovod (light)
    except ImportError:  # a horovod package that cannot be imported
        horovod = False
    if horovod:
        return Backend.HOROVOD
    return Backend.TF_COLLECTIVE if importlib.util.find_spec("tensorflow") else Backend.NONE
