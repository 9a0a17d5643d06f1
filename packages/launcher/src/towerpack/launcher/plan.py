"""Who runs where: global ranks for the workers of every node, and each task's environment."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from towerpack.launcher.group import Task

BACKENDS = ("horovod", "tf-server", "none")


@dataclass
class NodeInfo:
    """What a node tells the coordinator when it joins."""

    node: int  # node rank
    addr: str  # address the other nodes reach it at
    hostname: str  # for output and summaries
    slots: int  # worker processes on this node
    cuda: list[str] | None  # CUDA_VISIBLE_DEVICES per local worker, or None to leave it alone
    ports: list[int]  # free ports on ``addr``: one per local task, then one spare (MASTER_PORT on node 0)
    iface: str | None  # network interface holding ``addr`` (for Gloo)

    def to_dict(self) -> dict:
        return asdict(self)


def ps_nodes(n_ps: int, nnodes: int) -> list[int]:
    """Parameter-server task ``i`` runs on node ``i % nnodes``."""
    return [i % nnodes for i in range(n_ps)]


def ports_needed(node: int, slots: int, n_ps: int, nnodes: int) -> int:
    return slots + ps_nodes(n_ps, nnodes).count(node) + 1


@dataclass
class JobConfig:
    """Job-wide settings the coordinator turns into every task's environment."""

    backend: str
    n_ps: int
    rdzv_addr: str
    rdzv_port: int | None
    master_port: int | None  # explicit MASTER_PORT, else node 0's spare port
    max_restarts: int
    job_id: str


def build_tasks(nodes: list[NodeInfo], cfg: JobConfig, attempt: int) -> dict[int, list[Task]]:
    """The tasks of every node (keyed by node rank) for one attempt."""
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
    }
    ps_where = ps_nodes(cfg.n_ps, len(nodes))
    tf_cluster = None
    if cfg.backend == "tf-server":
        workers = [f"{n.addr}:{n.ports[i]}" for n in nodes for i in range(n.slots)]
        ps, used = [], {n.node: n.slots for n in nodes}
        for where in ps_where:
            node = nodes[where]
            ps.append(f"{node.addr}:{node.ports[used[where]]}")
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
            if cfg.backend == "horovod":
                env.update(_horovod_env(nodes, n, local, rank, world, cfg))
            elif tf_cluster is not None:
                env["TF_CONFIG"] = json.dumps(
                    {"cluster": tf_cluster, "task": {"type": "worker", "index": rank}}
                )
            mine.append(Task(str(rank), "worker", env))
        for index, where in enumerate(ps_where):
            if where == n.node:
                env = dict(
                    node_env,
                    TF_CONFIG=json.dumps({"cluster": tf_cluster, "task": {"type": "ps", "index": index}}),
                )
                # Parameter servers hold variables on the host's memory; keep them off the GPUs.
                env["CUDA_VISIBLE_DEVICES"] = ""
                mine.append(Task(f"ps{index}", "ps", env))
        tasks[n.node] = mine
    return tasks


def _horovod_env(
    nodes: list[NodeInfo], n: NodeInfo, local: int, rank: int, world: int, cfg: JobConfig
) -> dict:
    # Horovod's "cross" communicator joins the workers with the same local rank across nodes.
    peers = [m.node for m in nodes if m.slots > local]
    env = {
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": cfg.rdzv_addr,
        "HOROVOD_GLOO_RENDEZVOUS_PORT": str(cfg.rdzv_port),
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
