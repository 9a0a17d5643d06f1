"""Slurm: the node layout of an ``srun`` step (its compressed host list is expanded by
:mod:`towerpack.utils.hostlist`).

A launcher joins the other nodes of a Slurm job only when ``srun`` started it as one task of a step
that spans several nodes: that is the one way every node gets its own launcher. A ``launch --np 2``
typed in a batch script (or an ``salloc`` shell) runs on its own node, whatever the allocation.
``--no-slurm`` ignores Slurm altogether.
"""

from __future__ import annotations

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
    # Imported here: towerpack.dataflow costs a few tenths of a second, paid only inside a Slurm step.
    from towerpack.utils.hostlist import HostListError, expand_nodelist

    try:
        nodes = tuple(expand_nodelist(nodelist))
    except HostListError as e:
        raise UsageError(f"SLURM_STEP_NODELIST: {e}; use --no-slurm and give --nnodes") from None
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
