"""HorovodTrainer under mpirun or srun, without horovodrun or launch: it sets up its own Gloo rendezvous."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from support.dist_models import train_reference
from support.foreign_launchers import clean_env, mpirun_command
from support.procs import free_port, terminate_tree, wait_for
from towerpack.trainer.horovod_rendezvous import (
    RendezvousError,
    _iface_towards,
    gloo_rendezvous,
    rank_env,
    store_site,
)
from towerpack.utils.placement import placement

pytestmark = [pytest.mark.horovod, pytest.mark.usefixtures("horovod_required")]

BATCH = 8
# A rank script: HorovodTrainer on the float64 regression model for one epoch, then one more all-reduce
# of rank + 1; writes what each rank saw.
RANK_SCRIPT = """
import json, sys
from pathlib import Path

from support.dist_models import FetchVariables, RankSlices, Regression64, regression_data
from towerpack.trainer import HorovodTrainer, TrainConfig, launch_train_with_config
from towerpack.trainer.compat import tf, tfv1

trainer = HorovodTrainer()
hvd = trainer.hvd
x, y = regression_data()
values = {}
config = TrainConfig(
    model=Regression64(),
    dataflow=RankSlices(x, y, %(batch)d, trainer.rank, trainer.size),
    callbacks=[FetchVariables(values)],
    max_epoch=1,
)
launch_train_with_config(config, trainer)
with tf.Graph().as_default(), tfv1.Session() as sess:
    total = sess.run(hvd.allreduce(tf.constant(trainer.rank + 1.0, tf.float64), op=hvd.Sum))
result = {"rank": hvd.rank(), "size": hvd.size(), "sum": float(total), "w": values["w"].tolist(),
          "b": float(values["b"])}
Path(sys.argv[1], f"rank{hvd.rank()}.json").write_text(json.dumps(result))
""" % {"batch": BATCH}


def _env(**values) -> dict[str, str]:
    return {k: str(v) for k, v in values.items()}


def _site(env):
    site = store_site(placement(env), env)
    return site.addr, site.port


# -- where the store is, per launcher (in-process) --------------------------------------------------------


def _slurm(rank, node, local, nodelist="gpu[07-08]", tasks="2(x2)", world=4, job=1234, step=3):
    return _env(
        SLURM_JOB_ID=job,
        SLURM_STEP_ID=step,
        SLURM_PROCID=rank,
        SLURM_STEP_NUM_TASKS=world,
        SLURM_STEP_NODELIST=nodelist,
        SLURM_STEP_TASKS_PER_NODE=tasks,
        SLURM_NODEID=node,
        SLURM_LOCALID=local,
    )


def test_master_addr_and_port():
    env = _env(
        RANK=1, WORLD_SIZE=4, LOCAL_RANK=1, LOCAL_WORLD_SIZE=2, MASTER_ADDR="10.1.2.3", MASTER_PORT=29500
    )
    assert _site(env) == ("10.1.2.3", 29500)
    # torchrun's agent keeps MASTER_PORT for its own store: the next port up.
    torchrun = dict(env, GROUP_RANK="0", TORCHELASTIC_RUN_ID="r1", TORCHELASTIC_USE_AGENT_STORE="True")
    assert _site(torchrun) == ("10.1.2.3", 29501)
    assert _site(dict(torchrun, TORCHELASTIC_USE_AGENT_STORE="False")) == ("10.1.2.3", 29500)
    # They win over the Slurm derivation too (a user's choice).
    assert _site(dict(_slurm(3, 1, 1), MASTER_ADDR="10.9.9.9", MASTER_PORT="4000")) == ("10.9.9.9", 4000)


def test_slurm_step_first_host_and_port_from_job_and_step():
    # 20000 + (job * 8 + step) % 5000
    assert _site(_slurm(3, 1, 1)) == ("gpu07", 24875)
    assert _site(_slurm(0, 0, 0)) == ("gpu07", 24875)
    assert _site(_slurm(3, 1, 1, step=4)) == ("gpu07", 24876)
    assert _site(_slurm(3, 1, 1, job=1235)) == ("gpu07", 24883)
    # srun --mpi=pmi2 sets PMI_RANK too: placement reads PMI, the store is still the step's.
    pmi = dict(_slurm(2, 1, 0), PMI_RANK="2", PMI_SIZE="4", MPI_LOCALRANKID="0", MPI_LOCALNRANKS="2")
    assert _site(pmi) == ("gpu07", 24875)


def test_slurm_rank_variables_with_cross_ranks():
    env = _slurm(3, 1, 1)
    site = store_site(placement(env), env)
    assert rank_env(placement(env), site, env) == {
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": "gpu07",
        "HOROVOD_GLOO_RENDEZVOUS_PORT": "24875",
        "HOROVOD_CONTROLLER": "gloo",
        "HOROVOD_CPU_OPERATIONS": "gloo",
        "HOROVOD_HOSTNAME": "gpu08",
        "HOROVOD_RANK": "3",
        "HOROVOD_SIZE": "4",
        "HOROVOD_LOCAL_RANK": "1",
        "HOROVOD_LOCAL_SIZE": "2",
        "HOROVOD_CROSS_RANK": "1",
        "HOROVOD_CROSS_SIZE": "2",
    }
    # Uneven nodes (2 tasks, then 1): local rank 1 exists on the first node only.
    for rank, node, local, cross in ((1, 0, 1, ("0", "1")), (2, 1, 0, ("1", "2"))):
        env = _slurm(rank, node, local, nodelist="n[1-2]", tasks="2,1", world=3)
        got = rank_env(placement(env), store_site(placement(env), env), env)
        assert (got["HOROVOD_CROSS_RANK"], got["HOROVOD_CROSS_SIZE"]) == cross, f"rank {rank}"
        assert got["HOROVOD_HOSTNAME"] == f"n{node + 1}"


def test_open_mpi_on_one_host_uses_its_job_id():
    # What Open MPI 4.1's mpirun -np 2 sets (OMPI_MCA_ess_base_jobid); 25000 + id % 4000.
    env = _env(
        OMPI_COMM_WORLD_RANK=1,
        OMPI_COMM_WORLD_SIZE=2,
        OMPI_COMM_WORLD_LOCAL_RANK=1,
        OMPI_COMM_WORLD_LOCAL_SIZE=2,
        OMPI_MCA_ess_base_jobid=75497473,
        PMIX_NAMESPACE=75497473,
    )
    assert _site(env) == ("127.0.0.1", 26473)
    del env["OMPI_MCA_ess_base_jobid"]
    assert _site(env) == ("127.0.0.1", 26473)
    got = rank_env(placement(env), store_site(placement(env), env), env)
    assert (got["HOROVOD_RANK"], got["HOROVOD_LOCAL_SIZE"], got["HOROVOD_CROSS_SIZE"]) == ("1", "2", "1")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        # mpirun across hosts: rank 0's host is unknown.
        (
            _env(OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=2, OMPI_MCA_ess_base_jobid=7),
            "job spans hosts.*Set MASTER_ADDR",
        ),
        # hydra sets no job id.
        (_env(PMI_RANK=0, PMI_SIZE=2, MPI_LOCALRANKID=0, MPI_LOCALNRANKS=2), "no job id.*Set MASTER_ADDR"),
        (_env(RANK=0, WORLD_SIZE=2, MASTER_ADDR="h"), "MASTER_ADDR=h is set but MASTER_PORT is not"),
        (_env(RANK=0, WORLD_SIZE=2, MASTER_PORT=5), "MASTER_PORT=5 is set but MASTER_ADDR is not"),
        (_env(RANK=0, WORLD_SIZE=2), "MASTER_ADDR and MASTER_PORT are not set"),
        (dict(_slurm(0, 0, 0), SLURM_STEP_NODELIST="gpu[07-"), "SLURM_STEP_NODELIST: malformed"),
        (dict(_slurm(0, 0, 0), SLURM_JOB_ID="x1"), "SLURM_JOB_ID='x1' is not"),
    ],
)
def test_unknown_store_site_is_a_clear_error(env, message):
    with pytest.raises(RendezvousError, match=message):
        store_site(placement(env), env)


def test_nothing_to_do_or_not_ours():
    for env in (
        _env(),  # one process
        _env(HOROVOD_RANK=1, HOROVOD_SIZE=2, RANK=1, WORLD_SIZE=2),  # horovodrun / launch
        _env(OMPI_COMM_WORLD_RANK=0, OMPI_COMM_WORLD_SIZE=1),  # mpirun -np 1
    ):
        before = dict(env)
        with gloo_rendezvous(env):
            pass
        assert env == before
    # launch with another backend gives ranks but no Horovod rendezvous.
    with (
        pytest.raises(RendezvousError, match="--backend horovod"),
        gloo_rendezvous(_env(RANK=0, WORLD_SIZE=2, TOWERPACK_JOB_ID="j")),
    ):
        pass


def test_loopback_store_for_a_job_across_hosts_is_a_clear_error():
    env = _env(RANK=0, WORLD_SIZE=4, LOCAL_RANK=0, LOCAL_WORLD_SIZE=2, MASTER_ADDR="localhost", MASTER_PORT=1)
    unreachable = re.escape("is 127.0.0.1 on rank 0's host, which the other hosts cannot reach")
    with pytest.raises(RendezvousError, match=unreachable), gloo_rendezvous(env):
        pytest.fail("entered with an unreachable store")
    assert _iface_towards("127.0.0.1") == "lo"


# -- the store's life (in-process, threads for ranks) ----------------------------------------------------


def _ranks_env(rank: int, port: int, **extra) -> dict[str, str]:
    return _env(RANK=rank, WORLD_SIZE=2, LOCAL_RANK=rank, LOCAL_WORLD_SIZE=2, MASTER_ADDR="127.0.0.1",
                MASTER_PORT=port, **extra)  # fmt: skip


def _answers(port: int) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}/towerpack/ready", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def test_port_taken_is_a_clear_error_on_rank_0():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        taken = f"127.0.0.1:{port} .*MASTER_PORT={port}.*free port"
        with pytest.raises(RendezvousError, match=taken), gloo_rendezvous(_ranks_env(0, port)):
            pytest.fail("entered without a store")


def test_rank_waits_for_the_store_a_bounded_time():
    port = free_port()
    start = time.monotonic()
    with (
        pytest.raises(
            RendezvousError, match=f"rank 1: no Horovod rendezvous store answered at 127.0.0.1:{port}"
        ),
        gloo_rendezvous(_ranks_env(1, port, HOROVOD_START_TIMEOUT="0.5")),
    ):
        pytest.fail("entered without a store")
    assert 0.5 <= time.monotonic() - start < 3


@pytest.mark.timeout(30)
def test_store_starts_late_and_closes_once_every_rank_is_done():
    port = free_port()
    env0, env1 = _ranks_env(0, port), _ranks_env(1, port)
    rank1_in, rank1_may_leave, errors = threading.Event(), threading.Event(), []

    def rank1():
        try:
            with gloo_rendezvous(env1):
                rank1_in.set()
                rank1_may_leave.wait(10)
        except Exception as e:
            errors.append(e)

    thread = threading.Thread(target=rank1, daemon=True)
    thread.start()
    time.sleep(1.0)  # longer than Horovod's own client would wait (3 tries, 0.5 s apart)
    assert not rank1_in.is_set() and not errors
    with gloo_rendezvous(env0):
        assert env0["HOROVOD_RANK"] == "0" and env0["HOROVOD_GLOO_RENDEZVOUS_PORT"] == str(port)
        assert rank1_in.wait(10), errors
    assert env1["HOROVOD_RANK"] == "1" and env1["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == "127.0.0.1"
    # Rank 0 is done, rank 1 not yet: the store stays up for it.
    time.sleep(0.3)
    assert _answers(port)
    rank1_may_leave.set()
    thread.join(10)
    assert not errors
    wait_for(lambda: not _answers(port), timeout=5, what="the store to close")
    with socket.socket() as s:  # and nothing listens on its port any more
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()


# -- real processes -------------------------------------------------------------------------------------


def _check_results(out: Path) -> None:
    results = [json.loads(p.read_text()) for p in sorted(out.glob("rank*.json"))]
    assert sorted(r["rank"] for r in results) == [0, 1]
    assert [r["size"] for r in results] == [2, 2]
    assert [r["sum"] for r in results] == [3.0, 3.0]
    # Synchronous training over the 2 ranks matches one process at the total batch.
    expected = train_reference(batch=2 * BATCH, epochs=1)
    for r in results:
        np.testing.assert_allclose(r["w"], expected["w"], rtol=0, atol=1e-9)
        np.testing.assert_allclose(r["b"], expected["b"], rtol=0, atol=1e-9)


def _script(tmp_path: Path) -> tuple[Path, Path]:
    script, out = tmp_path / "rank.py", tmp_path / "out"
    script.write_text(RANK_SCRIPT)
    out.mkdir()
    return script, out


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
def test_mpirun_two_ranks(tmp_path):
    script, out = _script(tmp_path)
    cmd = [*mpirun_command(2), sys.executable, str(script), str(out)]
    proc = subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=80)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("Horovod rendezvous for open-mpi at 127.0.0.1:") == 2, proc.stderr[-3000:]
    _check_results(out)


def _free_slurm_job() -> tuple[int, int]:
    """A job id whose derived store port (step 0) is free here."""
    for job in range(os.getpid(), os.getpid() + 200):
        env = _slurm(0, 0, 0, nodelist="x", tasks="2", world=2, job=job, step=0)
        port = store_site(placement(env), env).port
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return job, port
    raise AssertionError("no free port among 200 derived ones")


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
def test_slurm_step_variables_two_processes(tmp_path):
    """Two ranks with the variables srun gives a 2-task step on this host (the real srun: another test)."""
    script, out = _script(tmp_path)
    job, port = _free_slurm_job()
    host = socket.gethostname()
    procs = []
    try:
        for rank in (0, 1):
            env = _slurm(rank, 0, rank, nodelist=host, tasks="2", world=2, job=job, step=0)
            procs.append(
                subprocess.Popen(
                    [sys.executable, str(script), str(out)],
                    env=clean_env(**env),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        errs = [p.communicate(timeout=80)[1] for p in procs]
    finally:
        for p in procs:
            terminate_tree(p.pid)
            p.wait()
    for rank, (p, err) in enumerate(zip(procs, errs, strict=True)):
        assert p.returncode == 0, f"rank {rank}: {err[-3000:]}"
        assert f"Horovod rendezvous for slurm at {host}:{port}" in err
    _check_results(out)
