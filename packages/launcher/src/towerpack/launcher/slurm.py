"""Slurm: the node layout of an ``srun`` step, and Slurm's compressed host lists.

A launcher joins the other nodes of a Slurm job only when ``srun`` started it as one task of a step
that spans several nodes: that is the one way every node gets its own launcher. A ``launch --np 2``
typed in a batch script (or an ``salloc`` shell) runs on its own node, whatever the allocation.
``--no-slurm`` ignores Slurm altogether.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from towerpack.launcher.errors import UsageError
from towerpack.launcher.net import DEFAULT_MASTER_PORT


@dataclass(frozen=True)
class SlurmStep:
    """This launcher's place in a multi-node ``srun`` step."""

    nodes: tuple[str, ...]
    node_rank: int
    job_id: str

    @property
    def nnodes(self) -> int:
        return len(self.nodes)

    @property
    def master_port(self) -> int:
        return DEFAULT_MASTER_PORT + int(self.job_id or 0) % 1000


def step(env: dict) -> SlurmStep | None:
    """The step this launcher is a task of, if ``srun`` started it on several nodes.

    The step's own variables count: a step may use only some of the job's nodes, and SLURM_NODEID
    counts within the step.
    """
    nodelist, count, node_id = (
        env.get("SLURM_STEP_NODELIST"),
        env.get("SLURM_STEP_NUM_NODES"),
        env.get("SLURM_NODEID"),
    )
    if not nodelist or not count or node_id is None:
        return None
    nodes = tuple(expand_nodelist(nodelist))
    if not count.isdigit() or int(count) != len(nodes) or not node_id.isdigit() or int(node_id) >= len(nodes):
        raise UsageError(
            f"inconsistent Slurm variables: SLURM_STEP_NODELIST={nodelist!r} "
            f"SLURM_STEP_NUM_NODES={count!r} SLURM_NODEID={node_id!r}; use --no-slurm and give --nnodes"
        )
    if len(nodes) < 2:
        return None
    tasks = env.get("SLURM_STEP_NUM_TASKS")
    if tasks and tasks.isdigit() and int(tasks) != len(nodes):
        raise UsageError(
            f"srun started {tasks} launchers on {len(nodes)} nodes; start one per node "
            "(srun --ntasks-per-node=1), or --no-slurm to run each on its own"
        )
    return SlurmStep(nodes, int(node_id), env.get("SLURM_JOB_ID", ""))


def allocation_note(env: dict) -> str | None:
    """A note for a launcher inside a multi-node allocation that is not an srun task: it runs alone."""
    nnodes = env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES")
    if env.get("SLURM_STEP_NODELIST") or not nnodes or not nnodes.isdigit() or int(nnodes) < 2:
        return None
    return (
        f"running on this node only, though this Slurm job has {nnodes} nodes: start one launcher "
        "per node with `srun --ntasks-per-node=1 launch ...` to use them all"
    )


_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_nodelist(nodelist: str) -> list[str]:
    """Expand Slurm's compressed host list, any number of bracket groups per name included:
    ``n[01-02,7],rack[1-2]-gpu[1-2]`` -> ``n01 n02 n7 rack1-gpu1 rack1-gpu2 rack2-gpu1 rack2-gpu2``."""
    hosts: list[str] = []
    for item in _split_top_level(nodelist):
        hosts.extend(_expand(item, nodelist))
    return hosts


def _split_top_level(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth not in (0, 1):
            raise UsageError(f"malformed Slurm node list {text!r}")
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise UsageError(f"malformed Slurm node list {text!r}")
    items.append(text[start:])
    if any(not item.strip() for item in items):
        raise UsageError(f"malformed Slurm node list {text!r}")
    return [item.strip() for item in items]


def _expand(item: str, whole: str) -> list[str]:
    head, bracket, rest = item.partition("[")
    if not bracket:
        return [item]
    ranges, _, tail = rest.partition("]")
    values = []
    for part in ranges.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise UsageError(f"malformed range {part!r} in Slurm node list {whole!r}")
        lo, hi = match.group(1), match.group(2) or match.group(1)
        if int(hi) < int(lo):
            raise UsageError(f"malformed range {part!r} in Slurm node list {whole!r}")
        values.extend(f"{n:0{len(lo)}d}" for n in range(int(lo), int(hi) + 1))
    return [f"{head}{v}{t}" for v in values for t in _expand(tail, whole)]
