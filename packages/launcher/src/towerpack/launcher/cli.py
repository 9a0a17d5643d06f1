"""The `launch` command line: check every input, then hand the job to the coordinator or a node agent."""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import uuid

from towerpack.launcher import gpus as gpu_list
from towerpack.launcher import net
from towerpack.launcher.errors import USAGE_EXIT, UsageError
from towerpack.launcher.hosts import expand_nodelist, parse_hostfile, parse_hosts
from towerpack.launcher.output import OutputOptions
from towerpack.launcher.plan import BACKENDS
from towerpack.launcher.spec import LaunchSpec, SshOptions

EPILOG = """examples:
  launch --gpus 0,1,2,3 train.py --lr 0.1     one process per GPU
  launch --np 2 -m mypkg.train                two CPU processes running a module
  launch --hosts a:4,b:4 train.py             eight processes on two hosts, over ssh
  launch --nnodes 2 --node-rank R --master a:29400 --gpus all train.py   (on each node)
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="launch",
        usage="launch [options] SCRIPT [ARGS...]\n       launch [options] -m MODULE [ARGS...]",
        description="Start, connect and supervise one process per GPU, slot or host.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = p.add_argument_group("processes")
    what.add_argument("--gpus", metavar="LIST", help="'all' or GPU indices like 0,1,2,3: one process per GPU")
    what.add_argument("--np", type=int, metavar="N", help="N CPU processes (CUDA_VISIBLE_DEVICES set empty)")
    what.add_argument("--hosts", metavar="LIST", help="host:slots list, e.g. a:4,b:4 (remote hosts over ssh)")
    what.add_argument("--hostfile", metavar="FILE", help="file of 'host slots=N' lines")
    what.add_argument("-m", "--module", action="store_true", help="run SCRIPT as a module (python -m)")
    what.add_argument("--no-python", action="store_true", help="run SCRIPT as an executable, not with Python")

    nodes = p.add_argument_group("one launcher per node (schedulers; Slurm's SLURM_* are detected)")
    nodes.add_argument("--nnodes", type=int, metavar="N", help="number of nodes")
    nodes.add_argument("--node-rank", type=int, metavar="R", help="this node's rank, 0..nnodes-1")
    nodes.add_argument(
        "--master",
        metavar="ADDR:PORT",
        help="where node 0 coordinates (default port 29400); with --hosts: the address to listen on",
    )
    nodes.add_argument(
        "--node-addr",
        metavar="ADDR",
        help="address other nodes reach this node at (default: the route to ADDR)",
    )
    nodes.add_argument(
        "--start-timeout", type=float, default=60.0, metavar="S", help="seconds to wait for all nodes (60)"
    )

    be = p.add_argument_group("backend")
    be.add_argument("--backend", choices=BACKENDS, help="default: horovod when importable, else none")
    be.add_argument(
        "--ps", type=int, default=0, metavar="K", help="parameter-server tasks (tf-server backend)"
    )
    be.add_argument(
        "--master-port", type=int, metavar="PORT", help="MASTER_PORT for the ranks (default: a free port)"
    )
    be.add_argument(
        "--max-restarts", type=int, default=0, metavar="K", help="restart the whole job up to K times"
    )

    out = p.add_argument_group("output")
    out.add_argument("--no-prefix", action="store_true", help="do not prefix lines with [host:rank]")
    out.add_argument("--ranks", metavar="LIST", help="show only these ranks' output, e.g. 0 or 0,2,ps0")
    out.add_argument("--log-dir", metavar="DIR", help="write DIR/rank.<r>/stdout and stderr")

    sh = p.add_argument_group("ssh")
    sh.add_argument("--ssh-port", type=int, metavar="PORT", help="ssh port on the remote hosts")
    sh.add_argument("--ssh-key", metavar="FILE", help="ssh identity file")
    sh.add_argument("--ssh-option", action="append", default=[], metavar="OPT", help="extra ssh -o OPT")

    # Used by the launcher itself when it starts a node's agent over ssh.
    p.add_argument("--agent-slots", type=int, help=argparse.SUPPRESS)
    p.add_argument("--job-id", help=argparse.SUPPRESS)
    p.add_argument("--watch-stdin", action="store_true", help=argparse.SUPPRESS)

    # One REMAINDER positional: a separate "script" positional would swallow a "--" right after it.
    p.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="SCRIPT [ARGS...]",
        help="training script (or module with -m, or executable with --no-python) and its arguments, "
        "passed untouched",
    )
    return p


def _master(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = value, "29400"
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--master expects ADDR:PORT, got {value!r}")
    return host.strip("[]"), int(port)


def _slurm(env: dict) -> dict | None:
    """Node layout from Slurm's variables, when this runs inside an allocation.

    Inside a job step (srun) the step's own variables win: a step may use only some of the job's nodes,
    and SLURM_NODEID counts within the step.
    """
    nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST")
    nnodes = env.get("SLURM_STEP_NUM_NODES") or env.get("SLURM_NNODES")
    if not nodelist or not nnodes or "SLURM_NODEID" not in env:
        return None
    nodes = expand_nodelist(nodelist)
    node_rank = int(env["SLURM_NODEID"])
    # A port derived from the job id keeps two jobs sharing a node from fighting over one port.
    port = 29400 + int(env.get("SLURM_JOB_ID", "0") or 0) % 1000
    return {
        "nnodes": int(nnodes),
        "node_rank": node_rank,
        "master": (nodes[0], port),
        "node_addr": nodes[node_rank] if node_rank < len(nodes) else None,
        "job_id": f"slurm{env.get('SLURM_JOB_ID', '')}",
    }


def _target(a: argparse.Namespace) -> tuple[list[str], list[str]]:
    """(what each task runs, the user's command for remote agents)."""
    flags = (["-m"] if a.module else []) + (["--no-python"] if a.no_python else [])
    target = [*flags, "--", a.script, *a.args]  # "--": a script named like an option stays the script
    if a.module:
        if a.no_python:
            raise UsageError("-m and --no-python cannot be combined")
        if importlib.util.find_spec(a.script.split(".")[0]) is None:
            raise UsageError(f"module {a.script!r} not found")
        return [sys.executable, "-u", "-m", a.script, *a.args], target
    if a.no_python:
        exe = a.script if os.sep in a.script else shutil.which(a.script)
        if not exe or not os.access(exe, os.X_OK):
            raise UsageError(f"executable {a.script!r} not found")
        return [a.script, *a.args], target
    if not os.path.isfile(a.script):
        raise UsageError(f"script {a.script!r} not found")
    return [sys.executable, "-u", a.script, *a.args], target


def _positive(name: str, value: int | None, minimum: int = 1) -> None:
    if value is not None and value < minimum:
        raise UsageError(f"{name} must be at least {minimum}, got {value}")


def parse(argv: list[str], env: dict | None = None) -> LaunchSpec:
    env = os.environ if env is None else env
    a = build_parser().parse_args(argv)
    # A "--" before the script ends the launcher's options; everything after the script is the script's.
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        raise UsageError("give the script to run (or a module with -m)")
    a.script, a.args = command[0], command[1:]
    _positive("--np", a.np)
    _positive("--ps", a.ps, 0)
    _positive("--max-restarts", a.max_restarts, 0)
    _positive("--nnodes", a.nnodes)
    if a.start_timeout <= 0:
        raise UsageError("--start-timeout must be positive")
    if a.master_port is not None and not 0 < a.master_port < 65536:
        raise UsageError(f"--master-port must be a port number, got {a.master_port}")
    argv_run, target = _target(a)

    backend = a.backend or ("horovod" if importlib.util.find_spec("horovod") else "none")
    if a.ps and backend != "tf-server":
        raise UsageError("--ps needs --backend tf-server")
    ranks = frozenset(r.strip() for r in a.ranks.split(",")) if a.ranks else None
    if ranks is not None and not all(r.isdigit() or (r.startswith("ps") and r[2:].isdigit()) for r in ranks):
        raise UsageError(f"--ranks expects ranks like 0,2 or ps0, got {a.ranks!r}")
    spec = LaunchSpec(
        mode="single",
        argv=argv_run,
        target=target,
        backend=backend,
        n_ps=a.ps,
        max_restarts=a.max_restarts,
        rank_master_port=a.master_port,
        output=OutputOptions(prefix=not a.no_prefix, ranks=ranks, log_dir=a.log_dir),
        ssh=SshOptions(a.ssh_port, a.ssh_key, a.ssh_option),
        start_timeout=a.start_timeout,
        job_id=a.job_id or uuid.uuid4().hex[:12],
        watch_stdin=a.watch_stdin,
        agent=a.agent_slots is not None,
        gpus=a.gpus,
    )

    host_list = None
    if a.hosts and a.hostfile:
        raise UsageError("give --hosts or --hostfile, not both")
    if a.hosts or a.hostfile:
        host_list = parse_hosts(a.hosts) if a.hosts else parse_hostfile(a.hostfile)
        if a.np is not None:
            raise UsageError(
                "--np cannot be combined with --hosts/--hostfile (the slots give the process count)"
            )
        if a.nnodes is not None or a.node_rank is not None:
            raise UsageError("--hosts/--hostfile start every node over ssh; leave out --nnodes/--node-rank")
    elif a.np is not None and a.gpus is not None:
        raise UsageError("give --np (CPU processes) or --gpus (one process per GPU), not both")
    elif a.np is None and a.gpus is None and a.agent_slots is None:
        raise UsageError("say how many processes: --np N, --gpus LIST, --hosts or --hostfile")

    gpu_ids = (
        gpu_list.select(a.gpus, env)
        if a.gpus is not None and (host_list is None or _any_local(host_list))
        else None
    )
    if a.agent_slots is not None:
        spec.slots = a.agent_slots
        if gpu_ids is not None:
            if len(gpu_ids) < spec.slots:
                raise UsageError(
                    f"this host has {spec.slots} slots but --gpus gives only {len(gpu_ids)} GPU(s)"
                )
            spec.cuda = gpu_ids[: spec.slots]
    elif gpu_ids is not None:
        spec.slots, spec.cuda = len(gpu_ids), gpu_ids
    elif a.np is not None:
        spec.slots, spec.cuda = a.np, [""] * a.np

    if host_list is not None:
        for h in host_list:
            net.resolve(h.host)  # a typo in any host name: one clear line now, not an ssh failure later
        spec.mode, spec.hosts, spec.nnodes, spec.cuda = "ssh", host_list, len(host_list), gpu_ids
        spec.master_addr = _ssh_master(host_list, a.master)
        if a.master and ":" in a.master:
            spec.master_port = _master(a.master)[1]
        return spec

    slurm = _slurm(env) if a.nnodes is None and a.master is None else None
    if a.nnodes is not None or a.node_rank is not None or a.master is not None or slurm:
        if slurm:
            spec.nnodes, spec.node_rank = slurm["nnodes"], slurm["node_rank"]
            (spec.master_addr, spec.master_port), spec.node_addr = slurm["master"], slurm["node_addr"]
            spec.job_id = a.job_id or slurm["job_id"]
        else:
            if a.nnodes is None or a.node_rank is None or a.master is None:
                raise UsageError("per-node mode needs all of --nnodes, --node-rank and --master ADDR:PORT")
            spec.nnodes, spec.node_rank = a.nnodes, a.node_rank
            spec.master_addr, spec.master_port = _master(a.master)
        if not 0 <= spec.node_rank < spec.nnodes:
            raise UsageError(f"--node-rank must be in 0..{spec.nnodes - 1}, got {spec.node_rank}")
        spec.mode = "node"
        spec.master_addr = net.resolve(spec.master_addr)
        spec.node_addr = a.node_addr or spec.node_addr
        if spec.node_rank == 0 and not spec.agent:
            net.check_port(spec.master_addr, spec.master_port, "--master port")
    return spec


def _any_local(hosts) -> bool:
    return any(net.is_local(h.host) for h in hosts)


def _ssh_master(hosts, master: str | None) -> str:
    if master:
        return net.resolve(_master(master)[0] if ":" in master else master)
    remote = [h.host for h in hosts if not net.is_local(h.host)]
    if not remote:
        return "127.0.0.1"
    return net.source_address(remote[0])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        spec = parse(argv)
        if spec.mode == "node" and (spec.node_rank > 0 or spec.agent):
            from towerpack.launcher import agent

            return agent.run(spec)
        from towerpack.launcher import coordinator

        return coordinator.run(spec)
    except UsageError as exc:
        print(f"launch: error: {exc}", file=sys.stderr, flush=True)
        return USAGE_EXIT
    except KeyboardInterrupt:
        return 130
