"""The batch policy when the world size changes: keep the global batch, or scale the learning rate.

A job resumed with another number of ranks (an elastic restart, a resize between runs) either keeps
the global batch constant, each rank taking ``global_batch / world_size`` (the optimization stays the
same: same steps, same learning rate), or keeps each rank's batch and scales the learning rate with
the global batch (the linear scaling rule: steps see ``world_size / base_world_size`` times the data).
The script chooses, calls :func:`batch_for_world_size` before building its dataflow and optimizer,
and every rank logs which policy gave which batch and learning rate.
"""

from __future__ import annotations

from dataclasses import dataclass

from towerpack.utils.placement import placement

from . import logger
from .choice import Choice

__all__ = ["BatchPolicy", "BatchSetup", "batch_for_world_size", "chosen_policies"]

#: What this process's calls of :func:`batch_for_world_size` gave, in order.
_chosen: list[BatchSetup] = []


def chosen_policies() -> list[BatchSetup]:
    """The batch setups this process chose (a rank whose batch or learning rate follows the world size
    cannot be resized in place: both are built into its dataflow and graph)."""
    return list(_chosen)


class BatchPolicy(Choice):
    """What stays the same when the world size changes."""

    CONSTANT_GLOBAL_BATCH = "constant-global-batch"  # per-rank batch = global batch / world size
    SCALE_LR = "scale-lr"  # per-rank batch fixed; lr scaled by world size / base world size


@dataclass(frozen=True)
class BatchSetup:
    """What a policy gives this rank: its batch per tower, the job's global batch, the learning rate."""

    policy: BatchPolicy
    world_size: int  # replicas: ranks times towers per rank
    batch_per_replica: int
    global_batch: int
    learning_rate: float


def batch_for_world_size(
    policy: BatchPolicy | str,
    *,
    learning_rate: float,
    global_batch: int | None = None,
    batch_per_replica: int | None = None,
    base_world_size: int | None = None,
    world_size: int | None = None,
    towers_per_rank: int = 1,
) -> BatchSetup:
    """The batch and learning rate of this rank under ``policy``; logged by every rank.

    Args:
        policy: a :class:`BatchPolicy` or its value (``"constant-global-batch"``, ``"scale-lr"``).
        learning_rate: the learning rate of the global batch the run was tuned at.
        global_batch: ``CONSTANT_GLOBAL_BATCH``: the global batch to keep (it must divide by the
            replicas).
        batch_per_replica, base_world_size: ``SCALE_LR``: each replica's batch, and the number of
            replicas ``learning_rate`` was tuned at.
        world_size: ranks in the job (default: this process's ``placement()``).
        towers_per_rank: training towers of each rank (multi-device trainers); replicas are ranks
            times towers.
    """
    policy = BatchPolicy.parse(policy, "batch policy")
    ranks = placement().world_size if world_size is None else int(world_size)
    if ranks < 1 or towers_per_rank < 1:
        raise ValueError(f"world_size and towers_per_rank must be >= 1, got {ranks} and {towers_per_rank}")
    replicas = ranks * int(towers_per_rank)
    if policy is BatchPolicy.CONSTANT_GLOBAL_BATCH:
        if global_batch is None or batch_per_replica is not None or base_world_size is not None:
            raise ValueError(
                "BatchPolicy.CONSTANT_GLOBAL_BATCH takes global_batch= "
                "(not batch_per_replica= or base_world_size=)"
            )
        if global_batch < 1 or global_batch % replicas:
            raise ValueError(
                f"the global batch {global_batch} does not divide among {replicas} replicas "
                f"({ranks} ranks x {towers_per_rank} towers); choose a global batch that is a multiple of "
                f"{replicas}, or BatchPolicy.SCALE_LR"
            )
        setup = BatchSetup(policy, replicas, global_batch // replicas, global_batch, float(learning_rate))
    else:
        if batch_per_replica is None or base_world_size is None or global_batch is not None:
            raise ValueError(
                "BatchPolicy.SCALE_LR takes batch_per_replica= and base_world_size= (not global_batch=)"
            )
        if batch_per_replica < 1 or base_world_size < 1:
            raise ValueError(
                "batch_per_replica and base_world_size must be >= 1, "
                f"got {batch_per_replica} and {base_world_size}"
            )
        lr = float(learning_rate) * replicas / base_world_size
        setup = BatchSetup(policy, replicas, int(batch_per_replica), batch_per_replica * replicas, lr)
    _chosen.append(setup)
    logger.info(
        "Batch policy %s: %d replicas x batch %d = global batch %d, learning rate %.6g",
        policy.name,
        setup.world_size,
        setup.batch_per_replica,
        setup.global_batch,
        setup.learning_rate,
    )
    return setup
