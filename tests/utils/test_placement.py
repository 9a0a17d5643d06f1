"""placement(): each launcher's exact variables give its place in the job; contradictions fail clearly."""

from __future__ import annotations

import json

import pytest

from towerpack.dataflow import DataFromList, Launcher, Placement, PlacementError, Role, ShardData, placement
from towerpack.dataflow.pipeline import sharding
from towerpack.dataflow.pipeline.seeding import stream_seed

# -- what each launcher sets, for one of its processes ----------------------------------------------

# launch --hosts a:3,b:1 (backend horovod): rank 3 is node 1's only process.
LAUNCH_HOROVOD = {
    "WORLD_SIZE": "4",
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "29400",
    "RESTART_COUNT": "0",
    "MAX_RESTARTS": "0",
    "TOWERPACK_JOB_ID": "4f1c2a9e",
    "NODE_RANK": "1",
    "LOCAL_WORLD_SIZE": "1",
    "NNODES": "2",
    "RANK": "3",
    "LOCAL_RANK": "0",
    "CUDA_VISIBLE_DEVICES": "0",
    "HOROVOD_GLOO_RENDEZVOUS_ADDR": "10.0.0.1:29401/3kq0",
    "HOROVOD_GLOO_RENDEZVOUS_PORT": "29401",
    "HOROVOD_CONTROLLER": "gloo",
    "HOROVOD_CPU_OPERATIONS": "gloo",
    "HOROVOD_HOSTNAME": "10.0.0.2",
    "HOROVOD_RANK": "3",
    "HOROVOD_SIZE": "4",
    "HOROVOD_LOCAL_RANK": "0",
    "HOROVOD_LOCAL_SIZE": "1",
    "HOROVOD_CROSS_RANK": "1",
    "HOROVOD_CROSS_SIZE": "2",
}

# torchrun --nnodes 2 --nproc-per-node 2 (rdzv c10d): rank 3.
TORCHRUN = {
    "RANK": "3",
    "LOCAL_RANK": "1",
    "WORLD_SIZE": "4",
    "LOCAL_WORLD_SIZE": "2",
    "GROUP_RANK": "1",
    "GROUP_WORLD_SIZE": "2",
    "ROLE_RANK": "3",
    "ROLE_WORLD_SIZE": "4",
    "ROLE_NAME": "default",
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "29500",
    "TORCHELASTIC_RESTART_COUNT": "0",
    "TORCHELASTIC_MAX_RESTARTS": "0",
    "TORCHELASTIC_RUN_ID": "job7",
    "TORCHELASTIC_USE_AGENT_STORE": "False",
    "TORCHELASTIC_ERROR_FILE": "/tmp/torchelastic_x/error.json",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    "OMP_NUM_THREADS": "1",
}

# A Kubernetes pod per rank (e.g. a JobSet/Indexed Job that sets RANK and WORLD_SIZE itself).
KUBERNETES_POD = {"RANK": "2", "WORLD_SIZE": "4", "MASTER_ADDR": "job-0.job", "MASTER_PORT": "29500"}

# horovodrun -np 2 -H localhost:2 --gloo: rank 1.
HOROVODRUN_ONE_HOST = {
    "HOROVOD_HOSTNAME": "localhost",
    "HOROVOD_RANK": "1",
    "HOROVOD_SIZE": "2",
    "HOROVOD_LOCAL_RANK": "1",
    "HOROVOD_LOCAL_SIZE": "2",
    "HOROVOD_CROSS_RANK": "0",
    "HOROVOD_CROSS_SIZE": "1",
    "HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1",
    "HOROVOD_GLOO_RENDEZVOUS_PORT": "41523",
    "HOROVOD_CONTROLLER": "gloo",
    "HOROVOD_CPU_OPERATIONS": "gloo",
    "HOROVOD_GLOO_IFACE": "lo",
    "NCCL_SOCKET_IFNAME": "lo",
}

# horovodrun -np 3 -H a:2,b:1 --gloo: rank 2 is b's only process.
HOROVODRUN_TWO_HOSTS = dict(
    HOROVODRUN_ONE_HOST,
    HOROVOD_HOSTNAME="b",
    HOROVOD_RANK="2",
    HOROVOD_SIZE="3",
    HOROVOD_LOCAL_RANK="0",
    HOROVOD_LOCAL_SIZE="1",
    HOROVOD_CROSS_RANK="1",
    HOROVOD_CROSS_SIZE="2",
)

# Open MPI 4: mpirun -np 4 -H a:2,b:2: rank 2 is b's first. NODE_RANK is a rank within the node.
OPEN_MPI = {
    "OMPI_COMM_WORLD_RANK": "2",
    "OMPI_COMM_WORLD_SIZE": "4",
    "OMPI_COMM_WORLD_LOCAL_RANK": "0",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
    "OMPI_COMM_WORLD_NODE_RANK": "0",
    "OMPI_UNIVERSE_SIZE": "4",
    "OMPI_MCA_ess_base_jobid": "3305177089",
    "OMPI_MCA_ess_base_vpid": "2",
    "OMPI_MCA_orte_num_nodes": "2",
    "OMPI_FIRST_RANKS": "0",
    "OMPI_APP_CTX_NUM_PROCS": "4",
    "PMIX_RANK": "2",
    "PMIX_NAMESPACE": "1642397697",
    "PMIX_SERVER_URI3": "pmix-server.12345;tcp4://127.0.0.1:51523",
}

# MPICH hydra: mpiexec -n 4 -hosts a:2,b:2: rank 2 is b's first process.
MPICH_HYDRA = {
    "PMI_RANK": "2",
    "PMI_SIZE": "4",
    "PMI_FD": "6",
    "PMI_SUBVERSION": "1",
    "PMI_VERSION": "1",
    "MPI_LOCALRANKID": "0",
    "MPI_LOCALNRANKS": "2",
    "MPIR_CVAR_CH3_INTERFACE_HOSTNAME": "b",
}

SLURM_JOB = {
    "SLURM_JOB_ID": "42",
    "SLURM_JOBID": "42",
    "SLURM_JOB_NAME": "train",
    "SLURM_JOB_NODELIST": "n[1-2]",
    "SLURM_NODELIST": "n[1-2]",
    "SLURM_JOB_NUM_NODES": "2",
    "SLURM_NNODES": "2",
    "SLURM_NTASKS": "3",
    "SLURM_NPROCS": "3",
    "SLURM_TASKS_PER_NODE": "2,1",
    "SLURM_SUBMIT_DIR": "/home/u",
    "SLURM_CLUSTER_NAME": "c",
}

# srun -n 3 inside that allocation: rank 2 is the one task on the second node.
SRUN_STEP = dict(
    SLURM_JOB,
    SLURM_STEP_ID="0",
    SLURM_STEPID="0",
    SLURM_PROCID="2",
    SLURM_LOCALID="0",
    SLURM_NODEID="1",
    SLURM_STEP_NUM_TASKS="3",
    SLURM_STEP_NUM_NODES="2",
    SLURM_STEP_TASKS_PER_NODE="2,1",
    SLURM_STEP_NODELIST="n[1-2]",
    SLURM_STEP_LAUNCHER_PORT="40001",
    SLURM_SRUN_COMM_PORT="40002",
)

# srun -N 4 -n 7 (tasks per node "2(x3),1"): rank 5 is node 2's second task.
SRUN_STEP_COMPRESSED = dict(
    SRUN_STEP,
    SLURM_STEP_ID="3",
    SLURM_STEPID="3",
    SLURM_PROCID="5",
    SLURM_LOCALID="1",
    SLURM_NODEID="2",
    SLURM_STEP_NUM_TASKS="7",
    SLURM_STEP_NUM_NODES="4",
    SLURM_STEP_TASKS_PER_NODE="2(x3),1",
)

# The batch script of sbatch -n 3: one process, although SLURM_PROCID and SLURM_NTASKS are set.
SBATCH_SCRIPT = dict(SLURM_JOB, SLURM_PROCID="0", SLURM_LOCALID="0", SLURM_NODEID="0", SLURM_CPUS_ON_NODE="2")

# srun -N 2 --ntasks-per-node 1 launch --nnodes 2 ... (3 ranks, then 1): rank 3 still sees its srun task.
SRUN_LAUNCH = dict(
    SRUN_STEP,
    SLURM_PROCID="1",
    SLURM_LOCALID="0",
    SLURM_NODEID="1",
    SLURM_STEP_NUM_TASKS="2",
    SLURM_STEP_TASKS_PER_NODE="1(x2)",
    **{k: v for k, v in LAUNCH_HOROVOD.items() if not k.startswith("HOROVOD_")},
)

K8S_CLUSTER = {
    "chief": ["job-chief-0:2222"],
    "worker": ["job-worker-0:2222", "job-worker-1:2222"],
    "ps": ["job-ps-0:2222", "job-ps-1:2222"],
}


def tf_config(cluster: dict, task_type: str, index: int) -> str:
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})


# launch --np 2 --backend tf-server --ps 1: the workers get RANK and TF_CONFIG, the ps only TF_CONFIG.
LAUNCH_TF_CLUSTER = {"worker": ["127.0.0.1:40001", "127.0.0.1:40002"], "ps": ["127.0.0.1:40003"]}
LAUNCH_TF_COMMON = {
    "WORLD_SIZE": "2",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "40004",
    "RESTART_COUNT": "0",
    "MAX_RESTARTS": "0",
    "TOWERPACK_JOB_ID": "77aa",
    "NODE_RANK": "0",
    "LOCAL_WORLD_SIZE": "2",
    "NNODES": "1",
}
LAUNCH_TF_WORKER = dict(
    LAUNCH_TF_COMMON, RANK="1", LOCAL_RANK="1", TF_CONFIG=tf_config(LAUNCH_TF_CLUSTER, "worker", 1)
)
LAUNCH_TF_PS = dict(
    LAUNCH_TF_COMMON, CUDA_VISIBLE_DEVICES="", TF_CONFIG=tf_config(LAUNCH_TF_CLUSTER, "ps", 0)
)


def at(rank, world, local, local_size, node, launcher, role=Role.WORKER):
    return Placement(rank, world, local, local_size, node, launcher, role)


CASES = {
    "no launcher": ({"HOME": "/home/u", "PATH": "/usr/bin"}, at(0, 1, 0, 1, 0, Launcher.NONE)),
    "launch, backend horovod": (LAUNCH_HOROVOD, at(3, 4, 0, 1, 1, Launcher.LAUNCH)),
    "torchrun": (TORCHRUN, at(3, 4, 1, 2, 1, Launcher.TORCHRUN)),
    "Kubernetes pod per rank": (KUBERNETES_POD, at(2, 4, 0, 1, 2, Launcher.ENV)),
    "horovodrun --gloo, one host": (HOROVODRUN_ONE_HOST, at(1, 2, 1, 2, 0, Launcher.HOROVOD)),
    "horovodrun --gloo, two hosts": (HOROVODRUN_TWO_HOSTS, at(2, 3, 0, 1, 1, Launcher.HOROVOD)),
    "Open MPI 4 mpirun": (OPEN_MPI, at(2, 4, 0, 2, 1, Launcher.OPEN_MPI)),
    "MPICH hydra": (MPICH_HYDRA, at(2, 4, 0, 2, 1, Launcher.PMI)),
    "MPICH hydra without local ids": (
        {"PMI_RANK": "2", "PMI_SIZE": "4", "PMI_FD": "6"},
        at(2, 4, 0, 1, 2, Launcher.PMI),
    ),
    "srun step": (SRUN_STEP, at(2, 3, 0, 1, 1, Launcher.SLURM)),
    "srun step, compressed tasks per node": (SRUN_STEP_COMPRESSED, at(5, 7, 1, 2, 2, Launcher.SLURM)),
    "srun step, old Slurm without STEP_ variables": (
        {k: v for k, v in SRUN_STEP.items() if not k.startswith("SLURM_STEP_")},
        at(2, 3, 0, 1, 1, Launcher.SLURM),
    ),
    "srun --mpi=pmi2 step": (
        dict(SRUN_STEP_COMPRESSED, PMI_RANK="5", PMI_SIZE="7", PMI_FD="7", PMI_JOBID="42.3"),
        at(5, 7, 1, 2, 2, Launcher.SLURM),
    ),
    "sbatch batch script": (SBATCH_SCRIPT, at(0, 1, 0, 1, 0, Launcher.NONE)),
    "sbatch batch step id": (
        dict(SBATCH_SCRIPT, SLURM_STEP_ID="4294967294"),
        at(0, 1, 0, 1, 0, Launcher.NONE),
    ),
    "srun launch": (SRUN_LAUNCH, at(3, 4, 0, 1, 1, Launcher.LAUNCH)),
    "Kubernetes TF_CONFIG chief": (
        {"TF_CONFIG": tf_config(K8S_CLUSTER, "chief", 0)},
        at(0, 3, 0, 1, 0, Launcher.TF_CONFIG),
    ),
    "Kubernetes TF_CONFIG worker": (
        {"TF_CONFIG": tf_config(K8S_CLUSTER, "worker", 1)},
        at(2, 3, 0, 1, 2, Launcher.TF_CONFIG),
    ),
    "Kubernetes TF_CONFIG ps": (
        {"TF_CONFIG": tf_config(K8S_CLUSTER, "ps", 1)},
        at(1, 2, 0, 1, 1, Launcher.TF_CONFIG, Role.PS),
    ),
    "TF_CONFIG evaluator outside the cluster": (
        {"TF_CONFIG": tf_config(K8S_CLUSTER, "evaluator", 0)},
        at(0, 1, 0, 1, 0, Launcher.TF_CONFIG, Role.EVALUATOR),
    ),
    "TF_CONFIG of a local run": ({"TF_CONFIG": "{}"}, at(0, 1, 0, 1, 0, Launcher.NONE)),
    "launch --backend tf-server worker": (LAUNCH_TF_WORKER, at(1, 2, 1, 2, 0, Launcher.LAUNCH)),
    "launch --backend tf-server ps": (LAUNCH_TF_PS, at(0, 1, 0, 1, 0, Launcher.LAUNCH, Role.PS)),
    "launch --backend tf-server ps under srun": (
        dict(SRUN_STEP, **LAUNCH_TF_PS),
        at(0, 1, 0, 1, 0, Launcher.LAUNCH, Role.PS),
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_each_launchers_variables_give_its_placement(name):
    env, expected = CASES[name]
    assert placement(env) == expected


def test_chief_and_distributed():
    assert placement(TORCHRUN).distributed and not placement(TORCHRUN).is_chief
    assert placement({"TF_CONFIG": tf_config(K8S_CLUSTER, "chief", 0)}).is_chief
    ps0 = placement({"TF_CONFIG": tf_config(K8S_CLUSTER, "ps", 0)})
    assert ps0.rank == 0 and not ps0.is_chief
    alone = placement({})
    assert alone.is_chief and not alone.distributed


def test_reads_os_environ_each_call(monkeypatch):
    clear_placement_env(monkeypatch)
    assert placement().launcher is Launcher.NONE
    for name, value in HOROVODRUN_ONE_HOST.items():
        monkeypatch.setenv(name, value)
    assert placement() == at(1, 2, 1, 2, 0, Launcher.HOROVOD)


# -- what is an error, and what the error says ------------------------------------------------------

ERRORS = {
    "RANK without WORLD_SIZE": ({"RANK": "1"}, ["RANK=1", "WORLD_SIZE"]),
    "WORLD_SIZE without RANK": ({"WORLD_SIZE": "2"}, ["WORLD_SIZE=2", "RANK"]),
    "LOCAL_RANK without LOCAL_WORLD_SIZE": (
        {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"},
        ["LOCAL_RANK=1", "LOCAL_WORLD_SIZE"],
    ),
    "RANK not an integer": ({"RANK": "one", "WORLD_SIZE": "2"}, ["RANK='one'", "not an integer"]),
    "RANK past WORLD_SIZE": ({"RANK": "4", "WORLD_SIZE": "4"}, ["RANK=4", "WORLD_SIZE=4"]),
    "negative RANK": ({"RANK": "-1", "WORLD_SIZE": "4"}, ["RANK=-1", "WORLD_SIZE=4"]),
    "WORLD_SIZE zero": ({"RANK": "0", "WORLD_SIZE": "0"}, ["WORLD_SIZE=0", "at least 1"]),
    "LOCAL_RANK past LOCAL_WORLD_SIZE": (
        {"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"},
        ["LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2"],
    ),
    "LOCAL_WORLD_SIZE past WORLD_SIZE": (
        {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4"},
        ["LOCAL_WORLD_SIZE=4", "WORLD_SIZE=2"],
    ),
    "RANK disagrees with HOROVOD_RANK": (
        dict(LAUNCH_HOROVOD, HOROVOD_RANK="2"),
        ["RANK=3", "WORLD_SIZE=4", "HOROVOD_RANK=2", "HOROVOD_SIZE=4"],
    ),
    "WORLD_SIZE disagrees with HOROVOD_SIZE": (
        dict(LAUNCH_HOROVOD, HOROVOD_SIZE="8"),
        ["RANK=3", "WORLD_SIZE=4", "HOROVOD_SIZE=8"],
    ),
    "RANK disagrees with TF_CONFIG's worker index": (
        dict(LAUNCH_TF_WORKER, RANK="0", LOCAL_RANK="0"),
        ["RANK=0", "TF_CONFIG", "index 1"],
    ),
    "RANK on a TF_CONFIG ps task": (
        dict(LAUNCH_TF_PS, RANK="0", LOCAL_RANK="0"),
        ["RANK=0", "TF_CONFIG", "'ps'"],
    ),
    "HOROVOD_RANK without HOROVOD_SIZE": ({"HOROVOD_RANK": "1"}, ["HOROVOD_RANK=1", "HOROVOD_SIZE"]),
    "HOROVOD_LOCAL_RANK past HOROVOD_LOCAL_SIZE": (
        dict(HOROVODRUN_ONE_HOST, HOROVOD_LOCAL_RANK="2"),
        ["HOROVOD_LOCAL_RANK=2", "HOROVOD_LOCAL_SIZE=2"],
    ),
    "OMPI rank without size": (
        {"OMPI_COMM_WORLD_RANK": "1"},
        ["OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE"],
    ),
    "OMPI local size not an integer": (
        dict(OPEN_MPI, OMPI_COMM_WORLD_LOCAL_SIZE="two"),
        ["OMPI_COMM_WORLD_LOCAL_SIZE='two'"],
    ),
    "PMI_SIZE without PMI_RANK": ({"PMI_SIZE": "4"}, ["PMI_SIZE=4", "PMI_RANK"]),
    "MPI_LOCALRANKID without MPI_LOCALNRANKS": (
        {"PMI_RANK": "0", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0"},
        ["MPI_LOCALRANKID=0", "MPI_LOCALNRANKS"],
    ),
    "srun step without SLURM_LOCALID": (
        {k: v for k, v in SRUN_STEP.items() if k != "SLURM_LOCALID"},
        ["SLURM_PROCID=2", "SLURM_LOCALID"],
    ),
    "SLURM_PROCID past the step's tasks": (
        dict(SRUN_STEP, SLURM_PROCID="3"),
        ["SLURM_PROCID=3", "SLURM_STEP_NUM_TASKS=3"],
    ),
    "malformed tasks per node": (
        dict(SRUN_STEP, SLURM_STEP_TASKS_PER_NODE="2(x),1"),
        ["SLURM_STEP_TASKS_PER_NODE='2(x),1'"],
    ),
    "SLURM_NODEID past the tasks per node": (
        dict(SRUN_STEP, SLURM_NODEID="2"),
        ["SLURM_NODEID=2", "SLURM_STEP_TASKS_PER_NODE=2,1"],
    ),
    "SLURM_LOCALID past its node's tasks": (
        dict(SRUN_STEP, SLURM_LOCALID="1"),
        ["SLURM_LOCALID=1", "SLURM_STEP_TASKS_PER_NODE=2,1"],
    ),
    "TF_CONFIG not JSON": ({"TF_CONFIG": "{cluster: 1}"}, ["TF_CONFIG='{cluster: 1}'", "not JSON"]),
    "TF_CONFIG task without type": (
        {"TF_CONFIG": json.dumps({"cluster": K8S_CLUSTER, "task": {"index": 0}})},
        ["TF_CONFIG", "type"],
    ),
    "TF_CONFIG task index outside the cluster": (
        {"TF_CONFIG": tf_config(K8S_CLUSTER, "worker", 2)},
        ["TF_CONFIG", "'worker' index 2", "2 'worker' addresses"],
    ),
}


@pytest.mark.parametrize("name", ERRORS)
def test_contradictions_and_half_present_sources_name_the_variables(name):
    env, fragments = ERRORS[name]
    with pytest.raises(PlacementError) as info:
        placement(env)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_lower_sources_are_ignored_not_contradictions():
    # Inherited from an outer launcher: the RANK source wins, whatever the others say.
    env = dict(OPEN_MPI, **SRUN_STEP, **TORCHRUN, TF_CONFIG=tf_config(K8S_CLUSTER, "chief", 0))
    assert placement(env) == at(3, 4, 1, 2, 1, Launcher.TORCHRUN)
    assert placement(dict(SRUN_STEP, **OPEN_MPI)).launcher is Launcher.OPEN_MPI


# -- the data each rank reads --------------------------------------------------------------------

PLACEMENT_VARS = {
    name
    for env, _ in CASES.values()
    for name in env
    if name not in ("HOME", "PATH", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")
}


def clear_placement_env(monkeypatch):
    for name in PLACEMENT_VARS | {"TF_CONFIG", "TOWERPACK_SEED"}:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    "env, rank, world",
    [
        (HOROVODRUN_ONE_HOST, 1, 2),
        (OPEN_MPI, 2, 4),
        (SRUN_STEP, 2, 3),
        (SBATCH_SCRIPT, 0, 1),
    ],
    ids=["horovodrun", "mpirun", "srun step", "sbatch script"],
)
def test_shard_data_splits_by_the_placement(monkeypatch, env, rank, world):
    clear_placement_env(monkeypatch)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    df = ShardData(DataFromList(list(range(10)), shuffle=False), remainder="uneven")
    df.reset_state()
    assert (df.rank, df.world_size) == (rank, world)
    assert list(df) == list(range(rank, 10, world))


def test_set_rank_info_still_wins_over_the_placement(monkeypatch):
    clear_placement_env(monkeypatch)
    for name, value in OPEN_MPI.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sharding, "_rank_override", None)
    sharding.set_rank_info(1, 2)
    df = ShardData(DataFromList(list(range(10)), shuffle=False))
    df.reset_state()
    assert list(df) == [1, 3, 5, 7, 9]


def test_explicit_rank_and_world_size_ignore_a_broken_environment(monkeypatch):
    clear_placement_env(monkeypatch)
    monkeypatch.setenv("RANK", "1")  # WORLD_SIZE missing: an error unless the caller says both
    df = ShardData(DataFromList(list(range(10)), shuffle=False), 0, 5)
    df.reset_state()
    assert list(df) == [0, 5]
    with pytest.raises(PlacementError, match="WORLD_SIZE"):
        ShardData(DataFromList(list(range(10)), shuffle=False))


def test_augmentation_streams_differ_between_ranks_of_any_launcher(monkeypatch):
    clear_placement_env(monkeypatch)
    monkeypatch.setenv("TOWERPACK_SEED", "7")
    seeds = []
    for rank in ("0", "1"):
        for name, value in dict(HOROVODRUN_ONE_HOST, HOROVOD_RANK=rank, HOROVOD_LOCAL_RANK=rank).items():
            monkeypatch.setenv(name, value)
        seeds.append(stream_seed(0))
    assert seeds[0] != seeds[1]
    assert stream_seed(0) == seeds[1]  # reproducible for a seed
