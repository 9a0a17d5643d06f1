"""The `launch` command line: parse it into a finished ``LaunchSpec``, then hand the job to the
coordinator or to a node agent."""

from __future__ import annotations

import argparse
import os
import sys

from towerpack.launcher import builders, console
from towerpack.launcher.console import Bars
from towerpack.launcher.errors import USAGE_EXIT, UsageError
from towerpack.launcher.membership import RENDEZVOUS_TIMEOUT_S, ResizeMode
from towerpack.launcher.plan import Backend
from towerpack.launcher.protocol import HEARTBEAT_TIMEOUT_S
from towerpack.launcher.spec import LaunchSpec, Role

EPILOG = """examples:
  launch --gpus 0,1,2,3 train.py --lr 0.1     one process per GPU
  launch --np 2 -m mypkg.train                two CPU processes running a module
  launch --hosts a:4,b:4 train.py             eight processes on two hosts, over ssh
  launch --nnodes 2 --node-rank R --master a:29400 --gpus all train.py   (on each node)
  launch --nnodes 2:4 --master a:29400 --gpus all train.py   (elastic: on each node, any time)
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
    what.add_argument(
        "--cpu-bind", action="store_true", help="pin each process to its own share of this node's cores"
    )

    nodes = p.add_argument_group("one launcher per node (an srun step is detected)")
    nodes.add_argument(
        "--nnodes",
        metavar="N|MIN:MAX",
        help="number of nodes; MIN:MAX: elastic, nodes may leave and join (see docs/cluster.md)",
    )
    nodes.add_argument(
        "--node-rank",
        type=int,
        metavar="R",
        help="this node's rank, 0..nnodes-1 (elastic: optional, 0 marks node 0)",
    )
    nodes.add_argument(
        "--master",
        metavar="ADDR:PORT",
        help="where node 0 coordinates (default port 29400; IPv6 as [ADDR]:PORT); elastic: may list other "
        "nodes after it (a,b:29400,...) that a joining node asks; with --hosts: the address to listen on",
    )
    nodes.add_argument(
        "--node-addr",
        metavar="ADDR",
        help="address other nodes reach this node at (default: the route to ADDR)",
    )
    nodes.add_argument(
        "--network-interface",
        metavar="IFACE",
        help="use this interface's address for this node (and for Gloo/NCCL)",
    )
    nodes.add_argument(
        "--start-timeout", type=float, default=60.0, metavar="S", help="seconds to wait for all nodes (60)"
    )
    nodes.add_argument(
        "--rendezvous-timeout",
        type=float,
        default=RENDEZVOUS_TIMEOUT_S,
        metavar="S",
        help=f"elastic: with fewer than MIN nodes left, wait this long for more ({RENDEZVOUS_TIMEOUT_S:g})",
    )
    nodes.add_argument(
        "--resize",
        choices=[m.value for m in ResizeMode],
        default=ResizeMode.IN_PLACE.value,
        help="elastic: when a node is lost or joins, regroup the running ranks in place where they can "
        "(in-place, the default) or restart every rank from its checkpoint (restart)",
    )
    nodes.add_argument(
        "--heartbeat-timeout",
        type=float,
        default=HEARTBEAT_TIMEOUT_S,
        metavar="S",
        help=f"a node silent this long is lost and ends the job, unless elastic ({HEARTBEAT_TIMEOUT_S:g})",
    )
    nodes.add_argument(
        "--secret-file",
        metavar="FILE",
        help="the job's secret, the same on every node (TOWERPACK_LAUNCH_SECRET wins; "
        "default ~/.towerpack/launch-secret)",
    )
    nodes.add_argument("--no-slurm", action="store_true", help="ignore Slurm's variables")

    be = p.add_argument_group("backend")
    be.add_argument(
        "--backend",
        choices=[b.value for b in Backend],
        help="default: horovod when importable, else none; tf-server and tf-collective set TF_CONFIG",
    )
    be.add_argument(
        "--ps", type=int, default=0, metavar="K", help="parameter-server tasks (tf-server backend)"
    )
    be.add_argument(
        "--master-port", type=int, metavar="PORT", help="MASTER_PORT for the ranks (default: a free port)"
    )
    be.add_argument(
        "--max-restarts", type=int, default=0, metavar="K", help="restart the whole job up to K times"
    )

    stop = p.add_argument_group("stopping")
    stop.add_argument(
        "--grace-period",
        type=float,
        default=30.0,
        metavar="S",
        help="after passing a signal on, seconds the workers get to checkpoint before SIGKILL (30)",
    )
    stop.add_argument("--error-file", metavar="FILE", help="write why the job failed to FILE (JSON)")

    out = p.add_argument_group("output")
    out.add_argument("--no-prefix", action="store_true", help="do not prefix lines with [host:rank]")
    out.add_argument("--ranks", metavar="LIST", help="show only these ranks' output, e.g. 0 or 0,2,ps0")
    out.add_argument("--log-dir", metavar="DIR", help="write DIR/rank.<r>/stdout and stderr")
    out.add_argument(
        "--bars",
        choices=[b.value for b in Bars if b is not Bars.RELAY],
        default=Bars.ONE.value,
        help="live progress bars on a terminal: one rank's (default), every rank's, or none",
    )

    sh = p.add_argument_group("ssh")
    sh.add_argument("--ssh-port", type=int, metavar="PORT", help="ssh port on the remote hosts")
    sh.add_argument("--ssh-key", metavar="FILE", help="ssh identity file")
    sh.add_argument("--ssh-option", action="append", default=[], metavar="OPT", help="extra ssh -o OPT")

    # Used by the launcher itself when it starts a node's agent over ssh.
    p.add_argument("--agent-slots", type=int, help=argparse.SUPPRESS)
    p.add_argument("--job-id", help=argparse.SUPPRESS)

    # One REMAINDER positional: a separate "script" positional would swallow a "--" right after it.
    p.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="SCRIPT [ARGS...]",
        help="training script (or module with -m, or executable with --no-python) and its arguments, "
        "passed untouched",
    )
    return p


def parse(argv: list[str], env: dict | None = None) -> LaunchSpec:
    """The finished spec for ``argv`` (raises UsageError naming the problem)."""
    env = os.environ if env is None else env
    return builders.build(build_parser().parse_args(argv), env)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        spec = parse(argv)
        console.set_bars(spec.output.bars)
        if spec.note:
            console.say(spec.note)
        if spec.role is Role.AGENT:
            from towerpack.launcher import agent

            return agent.run(spec)
        if spec.elastic:
            from towerpack.launcher.elastic import ElasticCoordinator

            return ElasticCoordinator(spec).run()
        from towerpack.launcher.coordinator import Coordinator

        return Coordinator(spec).run()
    except UsageError as exc:
        print(f"launch: error: {exc}", file=sys.stderr, flush=True)
        return USAGE_EXIT
    except KeyboardInterrupt:
        return 130
    finally:
        console.get().close()
