"""Where this process is in a job (rank, local rank, node), read from whatever launcher started it.

Every question of the form "am I rank 0?", "how many ranks are there?", "which GPU of this host is
mine?" is answered by :func:`placement`, and only there. It reads the environment, trying these
sources in order; the first one whose variables are present wins:

1. ``RANK`` + ``WORLD_SIZE`` (with ``LOCAL_RANK``/``LOCAL_WORLD_SIZE`` and ``NODE_RANK`` or
   ``GROUP_RANK``): towerpack's ``launch`` (it also sets ``TOWERPACK_JOB_ID``), torchrun (it sets
   ``TORCHELASTIC_RUN_ID`` and ``GROUP_RANK``), or anything else (Kubernetes, by hand);
2. ``HOROVOD_RANK`` + ``HOROVOD_SIZE``: ``horovodrun`` (Gloo);
3. ``OMPI_COMM_WORLD_RANK`` + ``OMPI_COMM_WORLD_SIZE``: Open MPI's ``mpirun``;
4. ``PMI_RANK`` + ``PMI_SIZE``: MPICH / Intel MPI (hydra); without hydra's local ids, an ``srun``
   step's variables give the local rank and node when they agree (``srun --mpi=pmi2`` sets both);
5. ``SLURM_PROCID`` + ``SLURM_STEP_NUM_TASKS`` inside an ``srun`` step (``SLURM_STEP_ID`` set): a
   batch script also sees ``SLURM_PROCID=0`` and ``SLURM_NTASKS=N`` but is one process;
6. ``TF_CONFIG``'s cluster and task;
7. nothing: a process alone, rank 0 of 1.

An outer launcher's variables are inherited by what an inner one starts (``srun launch ...``: the
ranks still see ``SLURM_PROCID``), so lower sources are ignored, not taken as contradictions. What is
an error (:class:`PlacementError`, naming the variables and their values): a source half present,
values that are not integers or out of range, ``RANK``/``WORLD_SIZE`` disagreeing with
``HOROVOD_RANK``/``HOROVOD_SIZE``, and ``RANK`` disagreeing with a chief-less ``TF_CONFIG``'s worker
index (``launch`` sets both pairs, so they must agree).

Where a launcher gives no node index, the node is ``rank // local_size``: exact when every node runs
``local_size`` consecutive ranks (mpirun's and hydra's default by-slot mapping with equal slots per
node; one process per host). Open MPI's ``OMPI_COMM_WORLD_NODE_RANK`` is a rank within the node, not
a node index, and is not used.
"""

from __future__ import annotations

import enum
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Launcher", "Placement", "PlacementError", "Role", "placement"]


class Launcher(enum.Enum):
    """Who set the variables a placement was read from."""

    LAUNCH = "launch"
    TORCHRUN = "torchrun"
    ENV = "env"
    HOROVOD = "horovod"
    OPEN_MPI = "open-mpi"
    PMI = "pmi"
    SLURM = "slurm"
    TF_CONFIG = "tf-config"
    NONE = "none"


class Role(enum.Enum):
    """What a process does in the job: trains (worker), holds variables (ps), or evaluates."""

    WORKER = "worker"
    PS = "ps"
    EVALUATOR = "evaluator"


class PlacementError(ValueError):
    """The environment's placement variables are incomplete, malformed or contradict each other."""


@dataclass(frozen=True)
class Placement:
    """This process's place in a job: among all ranks, among the ranks of its node, and its node."""

    rank: int
    world_size: int
    local_rank: int
    local_size: int
    node_rank: int
    launcher: Launcher
    role: Role = Role.WORKER

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} is outside [0, world_size={self.world_size})")
        if not 0 <= self.local_rank < self.local_size:
            raise ValueError(f"local_rank {self.local_rank} is outside [0, local_size={self.local_size})")
        if self.node_rank < 0:
            raise ValueError(f"node_rank must be >= 0, got {self.node_rank}")

    @property
    def is_chief(self) -> bool:
        """The one worker that writes logs and checkpoints: rank 0 of the workers."""
        return self.role is Role.WORKER and self.rank == 0

    @property
    def distributed(self) -> bool:
        """More than one process in the job."""
        return self.world_size > 1


@dataclass(frozen=True)
class _Value:
    """An integer read from the environment, with where it came from (for error messages)."""

    value: int
    origin: str  # "RANK=3", or "LOCAL_RANK unset: 0"


def _present(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip() != ""


def _int(env: Mapping[str, str], name: str) -> _Value:
    raw = env[name]
    try:
        return _Value(int(raw.strip()), f"{name}={raw}")
    except ValueError:
        raise PlacementError(
            f"{name}={raw!r} is not an integer; fix the command or launcher that sets it"
        ) from None


def _default(name: str, value: int) -> _Value:
    return _Value(value, f"{name} unset: {value}")


def _pair(env: Mapping[str, str], first: str, second: str, hint: str) -> tuple[_Value, _Value] | None:
    """Both variables as integers, None when neither is set, an error when only one is."""
    has_first, has_second = _present(env, first), _present(env, second)
    if not (has_first or has_second):
        return None
    if not (has_first and has_second):
        given, missing = (first, second) if has_first else (second, first)
        raise PlacementError(f"{given}={env[given]} is set but {missing} is not; {hint}")
    return _int(env, first), _int(env, second)


def _make(
    launcher: Launcher,
    rank: _Value,
    world: _Value,
    local_rank: _Value,
    local_size: _Value,
    node: _Value | None = None,
    role: Role = Role.WORKER,
) -> Placement:
    """Check the values' ranges, naming the variables, then build the placement."""
    hint = "these values contradict each other: check the command or launcher that set them"
    if world.value < 1:
        raise PlacementError(f"{world.origin} must be at least 1; {hint}")
    if not 0 <= rank.value < world.value:
        raise PlacementError(f"{rank.origin} is outside [0, {world.origin}); {hint}")
    if local_size.value < 1 or local_size.value > world.value:
        raise PlacementError(f"{local_size.origin} is outside [1, {world.origin}]; {hint}")
    if not 0 <= local_rank.value < local_size.value:
        raise PlacementError(f"{local_rank.origin} is outside [0, {local_size.origin}); {hint}")
    if node is None:
        node = _Value(rank.value // local_size.value, "rank // local size")
    elif node.value < 0:
        raise PlacementError(f"{node.origin} must be >= 0; {hint}")
    return Placement(rank.value, world.value, local_rank.value, local_size.value, node.value, launcher, role)


# -- the sources, in order ------------------------------------------------------------------------

_RANK_HINT = "set RANK and WORLD_SIZE together (LOCAL_RANK and LOCAL_WORLD_SIZE together), or neither"


def _from_rank_vars(env: Mapping[str, str]) -> Placement | None:
    if not _present(env, "RANK") and _present(env, "WORLD_SIZE") and _tf_task_type(env) in _NON_WORKERS:
        return _from_tf_config(env)  # launch's parameter servers: WORLD_SIZE is the workers' count
    pair = _pair(env, "RANK", "WORLD_SIZE", _RANK_HINT)
    if pair is None:
        return None
    rank, world = pair
    local = _pair(env, "LOCAL_RANK", "LOCAL_WORLD_SIZE", _RANK_HINT)
    local_rank, local_size = local or (_default("LOCAL_RANK", 0), _default("LOCAL_WORLD_SIZE", 1))
    node = None
    for name in ("NODE_RANK", "GROUP_RANK"):
        if _present(env, name):
            node = _int(env, name)
            break
    if _present(env, "TOWERPACK_JOB_ID"):
        launcher = Launcher.LAUNCH
    elif _present(env, "TORCHELASTIC_RUN_ID") or _present(env, "GROUP_RANK"):
        launcher = Launcher.TORCHRUN
    else:
        launcher = Launcher.ENV
    found = _make(launcher, rank, world, local_rank, local_size, node)
    _check_horovod_agrees(env, rank, world)
    _check_tf_config_agrees(env, rank)
    return found


def _check_horovod_agrees(env: Mapping[str, str], rank: _Value, world: _Value) -> None:
    pair = _HOROVOD.pair(env)
    if pair is None:
        return
    hvd_rank, hvd_size = pair
    hint = "the launcher that set both must give them the same values; unset the stale pair"
    if (hvd_rank.value, hvd_size.value) != (rank.value, world.value):
        raise PlacementError(
            f"{rank.origin}, {world.origin} contradict {hvd_rank.origin}, {hvd_size.origin}; {hint}"
        )


def _check_tf_config_agrees(env: Mapping[str, str], rank: _Value) -> None:
    config = _tf_config(env)
    if config is None:
        return
    cluster, task_type, index = config
    hint = "the launcher that set both must give them the same rank; unset the stale one"
    if task_type in _NON_WORKERS:
        raise PlacementError(
            f"{rank.origin} makes this process a worker but TF_CONFIG's task is a {task_type!r}; "
            "a parameter server or evaluator gets no RANK: unset it for that task"
        )
    if "chief" not in cluster and task_type == "worker" and index != rank.value:
        raise PlacementError(f"{rank.origin} contradicts TF_CONFIG's task index {index} (worker); {hint}")


@dataclass(frozen=True)
class _Names:
    """The variables by which one launcher gives rank, size, local rank, local size (and node)."""

    launcher: Launcher
    rank: str
    size: str
    local_rank: str
    local_size: str
    hint: str
    node: str | None = None

    def pair(self, env: Mapping[str, str]) -> tuple[_Value, _Value] | None:
        return _pair(env, self.rank, self.size, self.hint)

    def local(self, env: Mapping[str, str]) -> tuple[_Value, _Value] | None:
        return _pair(env, self.local_rank, self.local_size, self.hint)

    def make(self, env: Mapping[str, str], pair: tuple[_Value, _Value], local) -> Placement:
        local = local or (_default(self.local_rank, 0), _default(self.local_size, 1))
        node = _int(env, self.node) if self.node and _present(env, self.node) else None
        return _make(self.launcher, *pair, *local, node)

    def read(self, env: Mapping[str, str]) -> Placement | None:
        pair = self.pair(env)
        return None if pair is None else self.make(env, pair, self.local(env))


_HOROVOD = _Names(
    Launcher.HOROVOD, "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
    "horovodrun sets HOROVOD_RANK/SIZE and HOROVOD_LOCAL_RANK/LOCAL_SIZE; set them all or none",
    node="HOROVOD_CROSS_RANK",
)  # fmt: skip
_OPEN_MPI = _Names(
    Launcher.OPEN_MPI, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "Open MPI's mpirun sets OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE together",
)  # fmt: skip
_PMI = _Names(
    Launcher.PMI, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS",
    "MPICH's hydra sets PMI_RANK/PMI_SIZE (and MPI_LOCALRANKID/MPI_LOCALNRANKS) together",
)  # fmt: skip


def _from_pmi(env: Mapping[str, str]) -> Placement | None:
    pair = _PMI.pair(env)
    if pair is None:
        return None
    local = _PMI.local(env)
    if local is None:
        # srun --mpi=pmi2 sets PMI_RANK/PMI_SIZE too, but the step's variables also know the node.
        step = _from_slurm(env)
        if step is not None and (step.rank, step.world_size) == (pair[0].value, pair[1].value):
            return step
    return _PMI.make(env, pair, local)


_SLURM_HINT = "inside an srun step Slurm sets SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID, SLURM_NODEID"
#: Step ids from this one up are Slurm's own steps (batch script, interactive, extern), not srun's.
_SLURM_SPECIAL_STEPS = 0xFFFFFFF0


def _slurm_step(env: Mapping[str, str]) -> bool:
    for name in ("SLURM_STEP_ID", "SLURM_STEPID"):
        if _present(env, name):
            return _int(env, name).value < _SLURM_SPECIAL_STEPS
    return False


def _from_slurm(env: Mapping[str, str]) -> Placement | None:
    if not _present(env, "SLURM_PROCID") or not _slurm_step(env):
        return None
    world_name = "SLURM_STEP_NUM_TASKS" if _present(env, "SLURM_STEP_NUM_TASKS") else "SLURM_NTASKS"
    missing = [n for n in (world_name, "SLURM_LOCALID", "SLURM_NODEID") if not _present(env, n)]
    if missing:
        raise PlacementError(
            f"SLURM_PROCID={env['SLURM_PROCID']} is set in a step but {' and '.join(missing)} not; "
            f"{_SLURM_HINT}"
        )
    rank, world = _int(env, "SLURM_PROCID"), _int(env, world_name)
    local_rank, node = _int(env, "SLURM_LOCALID"), _int(env, "SLURM_NODEID")
    local_size = _slurm_local_size(env, node)
    return _make(Launcher.SLURM, rank, world, local_rank, local_size, node)


def _slurm_local_size(env: Mapping[str, str], node: _Value) -> _Value:
    name = (
        "SLURM_STEP_TASKS_PER_NODE" if _present(env, "SLURM_STEP_TASKS_PER_NODE") else "SLURM_TASKS_PER_NODE"
    )
    if not _present(env, name):
        raise PlacementError(f"SLURM_STEP_TASKS_PER_NODE is not set; {_SLURM_HINT}")
    counts = parse_slurm_counts(env[name], name)
    if not 0 <= node.value < len(counts):
        raise PlacementError(f"{node.origin} is outside the {len(counts)} nodes of {name}={env[name]}")
    return _Value(counts[node.value], f"{name}={env[name]} (node {node.value}: {counts[node.value]})")


_SLURM_COUNT = re.compile(r"(\d+)(?:\(x(\d+)\))?")


def parse_slurm_counts(text: str, name: str = "SLURM_STEP_TASKS_PER_NODE") -> list[int]:
    """Slurm's compressed per-node counts, ``"2(x3),1"`` -> ``[2, 2, 2, 1]``."""
    counts: list[int] = []
    for part in text.strip().split(","):
        match = _SLURM_COUNT.fullmatch(part.strip())
        if match is None:
            raise PlacementError(f"{name}={text!r} is not Slurm's per-node count list like '2(x3),1'")
        counts += [int(match[1])] * int(match[2] or 1)
    return counts


_TF_HINT = (
    'TF_CONFIG must be JSON like {"cluster": {"worker": [...]}, "task": {"type": "worker", "index": 0}}'
)
_NON_WORKERS = {"ps": Role.PS, "evaluator": Role.EVALUATOR}
_TF_TYPES = ("chief", "worker", "ps", "evaluator")


def _tf_config(env: Mapping[str, str]) -> tuple[dict[str, list[Any]], str, int] | None:
    """TF_CONFIG's (cluster, task type, task index), validated; None when unset or empty."""
    raw = env.get("TF_CONFIG", "").strip()
    if not raw:
        return None
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as e:
        raise PlacementError(f"TF_CONFIG={raw!r} is not JSON ({e}); {_TF_HINT}") from None
    if not isinstance(config, dict):
        raise PlacementError(f"TF_CONFIG={raw!r} is not a JSON object; {_TF_HINT}")
    cluster, task = config.get("cluster") or {}, config.get("task") or {}
    if not cluster and not task:
        return None  # TensorFlow, too, takes "{}" as a local run
    if not isinstance(cluster, dict) or not all(isinstance(v, list) for v in cluster.values()):
        raise PlacementError(
            f"TF_CONFIG's cluster {cluster!r} must map task types to address lists; {_TF_HINT}"
        )
    if not isinstance(task, dict) or task.get("type") not in _TF_TYPES:
        raise PlacementError(
            f"TF_CONFIG's task {task!r} needs a type among {', '.join(_TF_TYPES)}; {_TF_HINT}"
        )
    task_type, index = task["type"], task.get("index", 0)
    if isinstance(index, str) and index.strip().isdigit():
        index = int(index)
    if not isinstance(index, int) or isinstance(index, bool):
        raise PlacementError(f"TF_CONFIG's task index {index!r} is not an integer; {_TF_HINT}")
    members = len(cluster.get(task_type, []))
    # An evaluator is usually left out of the cluster: it talks to no one.
    if not 0 <= index < max(members, 1 if task_type == "evaluator" else 0):
        raise PlacementError(
            f"TF_CONFIG's task {task_type!r} index {index} is outside the cluster's {members} "
            f"{task_type!r} addresses; {_TF_HINT}"
        )
    return cluster, task_type, index


def _tf_task_type(env: Mapping[str, str]) -> str | None:
    config = _tf_config(env)
    return None if config is None else config[1]


def _from_tf_config(env: Mapping[str, str]) -> Placement | None:
    config = _tf_config(env)
    if config is None:
        return None
    cluster, task_type, index = config
    one = (_Value(0, "local rank 0"), _Value(1, "TF_CONFIG has no local size: 1"))
    where = f"TF_CONFIG's task {task_type} {index}"
    if task_type in _NON_WORKERS:
        # Parameter servers and evaluators are numbered among their own kind and read no shard.
        size = _Value(max(len(cluster.get(task_type, [])), 1), f"{task_type} count")
        launcher = Launcher.LAUNCH if _present(env, "TOWERPACK_JOB_ID") else Launcher.TF_CONFIG
        node = _int(env, "NODE_RANK") if _present(env, "NODE_RANK") else _Value(index, where)
        return _make(launcher, _Value(index, where), size, *one, node, _NON_WORKERS[task_type])
    chiefs = len(cluster.get("chief", []))
    rank = index if task_type == "chief" else chiefs + index
    world = _Value(chiefs + len(cluster.get("worker", [])), "chief and worker count")
    return _make(Launcher.TF_CONFIG, _Value(rank, where), world, *one)


_SOURCES: tuple[Callable[[Mapping[str, str]], Placement | None], ...] = (
    _from_rank_vars,
    _HOROVOD.read,
    _OPEN_MPI.read,
    _from_pmi,
    _from_slurm,
    _from_tf_config,
)


def placement(env: Mapping[str, str] | None = None) -> Placement:
    """This process's placement, read from ``env`` (``os.environ`` by default) each call.

    Raises :class:`PlacementError` when the variables are incomplete or contradict each other.
    """
    env = os.environ if env is None else env
    for source in _SOURCES:
        found = source(env)
        if found is not None:
            return found
    return Placement(0, 1, 0, 1, 0, Launcher.NONE)
