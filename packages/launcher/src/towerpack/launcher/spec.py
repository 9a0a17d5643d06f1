"""Everything one `launch` process was asked to do, after the command line has been checked."""

from __future__ import annotations

from dataclasses import dataclass, field

from towerpack.launcher.hosts import HostSlots
from towerpack.launcher.output import OutputOptions


@dataclass
class SshOptions:
    port: int | None = None
    key: str | None = None
    options: list[str] = field(default_factory=list)


@dataclass
class LaunchSpec:
    mode: str  # "single" (one machine), "ssh" (--hosts/--hostfile), "node" (one launcher per node)
    argv: list[str]  # what every task runs
    target: list[str]  # the user's command as given (-m/--no-python, script, args), for remote agents
    backend: str
    slots: int = 1  # this node's worker processes
    cuda: list[str] | None = None  # CUDA_VISIBLE_DEVICES per local worker (None: leave it alone)
    gpus: str | None = None  # --gpus as given
    hosts: list[HostSlots] | None = None
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int | None = None  # the coordinator's control port (node and ssh modes)
    node_addr: str | None = None
    rank_master_port: int | None = None  # explicit MASTER_PORT for the ranks
    n_ps: int = 0
    max_restarts: int = 0
    output: OutputOptions = field(default_factory=OutputOptions)
    ssh: SshOptions = field(default_factory=SshOptions)
    start_timeout: float = 60.0
    job_id: str = ""
    watch_stdin: bool = False
    agent: bool = False  # started over ssh by a coordinator: join it, whatever the node rank
