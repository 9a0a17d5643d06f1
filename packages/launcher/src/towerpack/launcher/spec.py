"""``LaunchSpec``: everything one `launch` process was asked to do, checked, complete and immutable."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from towerpack.launcher.hosts import HostSlots
from towerpack.launcher.membership import RENDEZVOUS_TIMEOUT_S, NodeRange, ResizeMode
from towerpack.launcher.output import OutputOptions
from towerpack.launcher.plan import Backend
from towerpack.launcher.protocol import HEARTBEAT_TIMEOUT_S


class Mode(enum.Enum):
    SINGLE = "single"  # every process on this machine
    SSH = "ssh"  # --hosts/--hostfile: this launcher starts an agent on every other host over ssh
    NODE = "node"  # one launcher per node (--nnodes, or an srun step): node 0 coordinates


class Role(enum.Enum):
    COORDINATOR = "coordinator"  # owns the job: one machine, ssh mode, node 0
    AGENT = "agent"  # runs one node's processes for a coordinator


@dataclass(frozen=True)
class SshOptions:
    port: int | None = None
    key: str | None = None
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class LaunchSpec:
    """A launch request after every input was checked: one per `launch` process.

    ``cli`` builds it (one builder per mode in :mod:`towerpack.launcher.builders`); the coordinator
    or the agent acts on it and never sees the command line. Fields a mode does not use keep their
    defaults. Times are in seconds.
    """

    mode: Mode
    role: Role
    argv: tuple[str, ...]  # what every task runs
    target: tuple[str, ...]  # the user's command as given (-m/--no-python, script, args), for ssh agents
    backend: Backend
    job_id: str
    secret: bytes = field(repr=False)  # see towerpack.launcher.job_secret
    slots: int = 1  # this node's worker processes
    cuda: tuple[str, ...] | None = None  # CUDA_VISIBLE_DEVICES per local worker (None: leave it alone)
    gpus: str | None = None  # --gpus as given (ssh agents pick their own)
    hosts: tuple[HostSlots, ...] = ()  # ssh mode
    nnodes: int = 1  # elastic: MAX
    node_rank: int = 0  # elastic agents: given at each rendezvous, not here
    elastic: NodeRange | None = None  # --nnodes MIN:MAX
    rendezvous_timeout: float = RENDEZVOUS_TIMEOUT_S  # elastic: wait this long when fewer than MIN are left
    resize: ResizeMode = ResizeMode.IN_PLACE  # elastic: how a change of nodes is taken
    master_addr: str = "127.0.0.1"  # where the coordinator listens
    master_port: int | None = None  # the coordinator's control port (node and ssh modes)
    masters: tuple[tuple[str, int], ...] = ()  # elastic: every --master address (node 0's first)
    node_addr: str | None = None  # this node's address for the others (default: its route to master)
    iface: str | None = None  # --network-interface
    rank_master_port: int | None = None  # explicit MASTER_PORT for the ranks
    n_ps: int = 0
    max_restarts: int = 0
    output: OutputOptions = field(default_factory=OutputOptions)
    ssh: SshOptions = field(default_factory=SshOptions)
    start_timeout: float = 60.0
    heartbeat_timeout: float = HEARTBEAT_TIMEOUT_S
    grace_period: float = 30.0
    error_file: str | None = None
    cpu_bind: bool = False
    via_ssh: bool = False  # an agent started over ssh: its stdin is the link to the coordinator
    note: str | None = None  # printed at start (Slurm allocation not used, ...)
