"""Who runs where: global ranks for the workers of every node, and each task's environment."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

from towerpack.launcher import gloo_store
from towerpack.launcher.net import host_port
from towerpack.launcher.tasks import Task, TaskId


class Backend(enum.Enum):
    """How the ranks find each other: Horovod's Gloo rendezvous, a ``TF_CONFIG`` cluster (with parameter
    servers, or for TensorFlow's collective all-reduce), or neither. Every task gets the value as
    ``TOWERPACK_BACKEND``, so a script can pick its trainer from it."""

    HOROVOD = "horovod"
    TF_SERVER = "tf-server"
    TF_COLLECTIVE = "tf-collective"
    NONE = "none"

    @property
    def uses_tf_config(self) -> bool:
        return self in (Backend.TF_SERVER, Backend.TF_COLLECTIVE)


@dataclass(frozen=True)
class NodeInfo:
    """What a node tells the coordinator when it joins."""

    node: int  # node rank
    addr: str  # address the other nodes reach it at
    hostname: str  # for output and summaries
    slots: int  # worker processes on this node
    cuda: tuple[str, ...] | None  # CUDA_VISIBLE_DEVICES per local worker, or None to leave it alone
    ports: tuple[int, ...]  # ports held on this node: one per local task, then one spare (MASTER_PORT)
    iface: str | None  # network interface holding ``addr`` (for Gloo)
    probe_port: int | None = None  # where this node's launcher answers reachability probes at start
    control_port: int | None = None  # elastic jobs: where its launcher listens (to take over, to redirect)


def ps_nodes(n_ps: int, nnodes: int) -> list[int]:
    """Parameter-server task ``i`` runs on node ``i % nnodes``."""
    return [i % nnodes for i in range(n_ps)]


def ports_needed(node: int, slots: int, n_ps: int, nnodes: int) -> int:
    return slots + ps_nodes(n_ps, nnodes).count(node) + 1


def elastic_ports(slots: int, n_ps: int) -> int:
    """Ports a node of an elastic job holds: its node rank (so its share of parameter servers) changes
    at every rendezvous, so enough for all of them."""
    return slots + n_ps + 1


@dataclass(frozen=True)
class JobConfig:
    """Job-wide settings the coordinator turns into every task's environment."""

    backend: Backend
    n_ps: int
    store: gloo_store.StoreAddress | None  # the Gloo rendezvous store (backend horovod)
    master_port: int | None  # explicit MASTER_PORT, else node 0's spare port
    max_restarts: int
    job_id: str


def build_tasks(
    nodes: list[NodeInfo], cfg: JobConfig, attempt: int, extra: dict[str, str] | None = None
) -> dict[int, list[Task]]:
    """The tasks of every node (keyed by node rank) for one attempt; ``extra`` goes to every task."""
    nodes = sorted(nodes, key=lambda n: n.node)
    world = sum(n.slots for n in nodes)
    offsets, total = {}, 0
    for n in nodes:
        offsets[n.node] = total
        total += n.slots
    master = nodes[0]
    common = {
        "WORLD_SIZE": str(world),
        "MASTER_ADDR": master.addr,
        "MASTER_PORT": str(cfg.master_port or master.ports[-1]),
        "RESTART_COUNT": str(attempt),
        "MAX_RESTARTS": str(cfg.max_restarts),
        "TOWERPACK_JOB_ID": cfg.job_id,
        "TOWERPACK_BACKEND": cfg.backend.value,
        **(extra or {}),
    }
    ps_where = ps_nodes(cfg.n_ps, len(nodes))
    tf_cluster = None
    if cfg.backend.uses_tf_config:
        workers = [host_port(n.addr, n.ports[i]) for n in nodes for i in range(n.slots)]
        ps, used = [], {n.node: n.slots for n in nodes}
        for where in ps_where:
            node = nodes[where]
            ps.append(host_port(node.addr, node.ports[used[where]]))
            used[where] += 1
        tf_cluster = {"worker": workers, **({"ps": ps} if ps else {})}

    tasks: dict[int, list[Task]] = {}
    for n in nodes:
        node_env = dict(common, NODE_RANK=str(n.node), LOCAL_WORLD_SIZE=str(n.slots), NNODES=str(len(nodes)))
        mine = []
        for local in range(n.slots):
            rank = offsets[n.node] + local
            env = dict(node_env, RANK=str(rank), LOCAL_RANK=str(local))
            if n.cuda is not None:
                env["CUDA_VISIBLE_DEVICES"] = n.cuda[local]
            if cfg.backend is Backend.HOROVOD:
                env.update(_horovod_env(nodes, n, local, rank, world, cfg))
            elif tf_cluster is not None:
                env["TF_CONFIG"] = json.dumps(
                    {"cluster": tf_cluster, "task": {"type": "worker", "index": rank}}
                )
            mine.append(Task(TaskId.worker(rank), env))
        for index, where in enumerate(ps_where):
            if where == n.node:
                env = dict(
                    node_env,
                    TF_CONFIG=json.dumps({"cluster": tf_cluster, "task": {"type": "ps", "index": index}}),
                )
                # Parameter servers hold variables on the host's memory; keep them off the GPUs.
                env["CUDA_VISIBLE_DEVICES"] = ""
                mine.append(Task(TaskId.ps(index), env))
        tasks[n.node] = mine
    return tasks


def _horovod_env(
    nodes: list[NodeInfo], n: NodeInfo, local: int, rank: int, world: int, cfg: JobConfig
) -> dict:
    # Horovod's "cross" communicator joins the workers with the same local rank across nodes.
    peers = [m.node for m in nodes if m.slots > local]
    env = {
        **gloo_store.rank_env(cfg.store),
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_HOSTNAME": n.addr,
        "HOROVOD_RANK": str(rank),
        "HOROVOD_SIZE": str(world),
        "HOROVOD_LOCAL_RANK": str(local),
        "HOROVOD_LOCAL_SIZE": str(n.slots),
        "HOROVOD_CROSS_RANK": str(peers.index(n.node)),
        "HOROVOD_CROSS_SIZE": str(len(peers)),
    }
    if n.iface:
        env["HOROVOD_GLOO_IFACE"] = n.iface
        env["NCCL_SOCKET_IFNAME"] = n.iface
    return env
