"""The trainer a script gets for how it was started: data-parallel across the job's processes, towers
in one process, or one tower.

A worker of a distributed job (any launcher :func:`~towerpack.utils.placement` knows) gets the
trainer of the launcher's backend (``TOWERPACK_BACKEND``): :class:`CollectiveAllReduceTrainer` for
``launch --backend tf-collective``, :class:`DistributedTrainerReplicated` for ``--backend tf-server``
(its parameter-server tasks too: they serve in the constructor, then exit), :class:`HorovodTrainer`
otherwise (horovodrun, srun, mpirun ... set no backend; Horovod makes its own rendezvous there).
A process alone gets :class:`SyncMultiGPUTrainerReplicated` for several towers (GPUs, or logical
CPU devices), else :class:`SimpleTrainer`.
"""

from __future__ import annotations

import os

from towerpack.utils.placement import Role, placement

from .base import Trainer
from .collective_trainer import CollectiveAllReduceTrainer
from .horovod_trainer import HorovodTrainer
from .multigpu import SyncMultiGPUTrainerReplicated
from .tf_server_trainer import DistributedTrainerReplicated
from .trainers import SimpleTrainer

__all__ = ["BACKEND_VAR", "default_trainer"]

#: Set by ``launch`` for every task: ``horovod``, ``tf-server``, ``tf-collective`` or ``none``.
BACKEND_VAR = "TOWERPACK_BACKEND"


def default_trainer(towers: int = 1) -> Trainer:
    """The trainer for this process (see the module docstring); ``towers`` is for a process alone.

    Raises ValueError for several towers in a process of a Horovod or collective job (each process
    trains one tower there; a TF-server worker may train several).
    """
    where = placement()
    if os.environ.get(BACKEND_VAR) == "tf-server" and os.environ.get("TF_CONFIG"):
        return DistributedTrainerReplicated(towers)  # a parameter server's placement is not distributed
    if where.distributed and where.role is Role.WORKER:
        if towers > 1:
            raise ValueError(
                f"towers={towers} asked for in rank {where.rank} of {where.world_size}: under a launcher "
                "every process trains one tower"
            )
        if os.environ.get(BACKEND_VAR) == "tf-collective":
            return CollectiveAllReduceTrainer()
        return HorovodTrainer()
    if towers > 1:
        return SyncMultiGPUTrainerReplicated(towers)
    return SimpleTrainer()
