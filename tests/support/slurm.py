"""A throwaway single-machine Slurm for tests: its own munged, slurmctld and slurmd in a temporary folder.

Everything lives under one folder (munge key and socket, slurm.conf, state, spool, logs, pid files), on
free ports, so it neither needs nor disturbs a Slurm or munge installed on the machine. The daemons run
without the test tag (``TAG_VAR``) in their environment, so a test does not count them as its leftovers;
the tasks of a job inherit the environment of the ``srun``/``sbatch`` that submitted it, so they carry
the tag and a test that leaves one behind fails. ``running_slurm`` stops everything it started.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from support.procs import TAG_VAR, free_port

#: Set in the daemons' environment (and so in the slurmstepd processes slurmd forks): how teardown finds
#: every process of this Slurm, even one that outlived its parent.
OWNER_VAR = "TOWERPACK_TEST_SLURM"
PROGRAMS = (
    "munged",
    "mungekey",
    "slurmctld",
    "slurmd",
    "srun",
    "sbatch",
    "scancel",
    "squeue",
    "sinfo",
    "scontrol",
)
SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")
START_TIMEOUT_S = 20.0
MAX_SOCKET_PATH = 107  # sun_path holds 108 bytes with the terminating NUL
TERMINAL_JOB_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL"}
)


class SlurmStartError(RuntimeError):
    """The test Slurm did not come up; the message holds the daemons' log tails."""


def _which(name: str) -> str | None:
    found = shutil.which(name)
    return found or next((f"{d}/{name}" for d in SBIN if os.access(f"{d}/{name}", os.X_OK)), None)


def unavailable_reason() -> str | None:
    """Why this machine cannot run the test Slurm, or None when it can."""
    missing = [name for name in PROGRAMS if _which(name) is None]
    if missing:
        return f"{', '.join(missing)} not installed (scripts/system_deps.sh installs Slurm and munge)"
    if os.geteuid() != 0:
        return "a test Slurm needs root (slurmd starts job steps as their user)"
    return None


@dataclass(frozen=True)
class JobState:
    """What ``scontrol show job`` says of a batch job."""

    state: str  # COMPLETED, FAILED, CANCELLED, RUNNING, ...
    exit_code: str  # "rc:signal", as Slurm writes it

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL_JOB_STATES


@dataclass
class Slurm:
    """A running test Slurm: one node (``node``) with ``cpus`` CPUs in one default partition."""

    root: Path
    conf: Path
    node: str
    cpus: int
    daemons: dict[str, subprocess.Popen]

    def client_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) for the Slurm clients: ``SLURM_CONF`` names this
        Slurm, and the variables of any Slurm job the tests themselves run inside are left out (an
        ``srun`` would join that job instead)."""
        env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = str(self.conf)
        return env

    def run(self, *command: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
        """A Slurm client command (``squeue``, ``scancel``...) against this Slurm."""
        proc = subprocess.run(
            list(command), capture_output=True, text=True, timeout=timeout, env=self.client_env()
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(command)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def job_state(self, job_id: str) -> JobState:
        out = self.run("scontrol", "show", "-o", "job", job_id).stdout
        fields = dict(re.findall(r"(\w+)=(\S*)", out))
        return JobState(fields.get("JobState", "?"), fields.get("ExitCode", "?"))

    def wait_job(self, job_id: str, timeout: float) -> JobState:
        """Wait until batch job ``job_id`` has ended; return its final state."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.job_state(job_id)
            if state.finished:
                return state
            if time.monotonic() > deadline:
                raise AssertionError(f"Slurm job {job_id} still {state.state} after {timeout}s")
            time.sleep(0.2)

    def cancel_all(self, timeout: float = 15) -> None:
        """Cancel every job of this Slurm and wait until none is left."""
        jobs = self.run("squeue", "-h", "-o", "%i", check=False).stdout.split()
        if not jobs:
            return
        self.run("scancel", *jobs, check=False)
        deadline = time.monotonic() + timeout
        while self.run("squeue", "-h", "-o", "%i", check=False).stdout.strip():
            if time.monotonic() > deadline:
                raise AssertionError(f"Slurm jobs {jobs} still listed {timeout}s after scancel")
            time.sleep(0.2)

    def log_tails(self, lines: int = 15) -> str:
        parts = []
        for log in sorted((self.root / "log").glob("*.stderr")):
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {log.name} (last {len(tail)} lines)\n" + "\n".join(tail))
        return "\n".join(parts)

    def stop(self) -> None:
        """Stop the daemons (slurmd, slurmctld, then munged) and anything left that they started."""
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.daemons.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        owned = _owned_processes(str(self.root))
        for proc in owned:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(owned, timeout=5)


def _owned_processes(root: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.Error, OSError):
            if proc.environ().get(OWNER_VAR) == root and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


def _node_hardware() -> dict[str, str]:
    """The hardware fields of ``slurmd -C``'s node line (CPUs, boards, sockets, cores, threads), so the
    node's configuration matches what slurmd finds and Slurm does not drain it."""
    out = subprocess.run([_which("slurmd"), "-C"], capture_output=True, text=True, timeout=10).stdout
    line = next((ln for ln in out.splitlines() if ln.startswith("NodeName=")), "")
    keys = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore")
    fields = dict(re.findall(r"(\w+)=(\S+)", line))
    if not fields.get("CPUs", "").isdigit():
        raise SlurmStartError(f"`slurmd -C` printed no CPU count: {out!r}")
    return {k: fields[k] for k in keys if k in fields}


def _write_conf(root: Path, node: str, hardware: dict[str, str]) -> Path:
    ctld_port = free_port()
    slurmd_port = next(p for p in iter(free_port, None) if p != ctld_port)
    conf = root / "slurm.conf"
    conf.write_text(
        f"""# A single-machine Slurm for towerpack's tests.
ClusterName=towerpack-test
SlurmctldHost={node}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root / "munge" / "munge.socket"}
CredType=cred/munge
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
StateSaveLocation={root / "state"}
SlurmdSpoolDir={root / "spool"}
SlurmctldPidFile={root / "slurmctld.pid"}
SlurmdPidFile={root / "slurmd.pid"}
SlurmctldLogFile={root / "log" / "slurmctld.log"}
SlurmdLogFile={root / "log" / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=5
NodeName={node} NodeAddr=127.0.0.1 {" ".join(f"{k}={v}" for k, v in hardware.items())} State=UNKNOWN
PartitionName=test Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""
    )
    return conf


def _start(name: str, args: list[str], root: Path, env: dict[str, str]) -> subprocess.Popen:
    # In the foreground each daemon also writes its log to stderr, including what comes before it can
    # open its log file (a bad configuration).
    with open(root / "log" / f"{name}.stderr", "wb") as out:
        return subprocess.Popen(
            [_which(name), *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _idle(slurm: Slurm) -> bool:
    for name, proc in slurm.daemons.items():
        if proc.poll() is not None:
            raise SlurmStartError(
                f"{name} exited with code {proc.returncode} while the test Slurm started\n{slurm.log_tails()}"
            )
    proc = slurm.run("sinfo", "-h", "-n", slurm.node, "-o", "%t", timeout=10, check=False)
    return proc.returncode == 0 and proc.stdout.strip() == "idle"


def start_slurm(root: Path, timeout: float = START_TIMEOUT_S) -> Slurm:
    """Start munged, slurmctld and slurmd under ``root`` and wait until the node is idle."""
    for sub in ("munge", "state", "spool", "log"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    munge = root / "munge"
    if len(str(munge / "munge.socket")) > MAX_SOCKET_PATH:
        raise SlurmStartError(
            f"{root} is too long a path for munged's socket (Unix sockets: {MAX_SOCKET_PATH})"
        )
    node = socket.gethostname().split(".")[0]
    key = munge / "munge.key"
    subprocess.run([_which("mungekey"), "--create", f"--keyfile={key}"], check=True, timeout=10)
    hardware = _node_hardware()
    conf = _write_conf(root, node, hardware)
    env = {k: v for k, v in os.environ.items() if k != TAG_VAR and not k.startswith("SLURM_")}
    env.update(SLURM_CONF=str(conf), **{OWNER_VAR: str(root)})
    slurm = Slurm(root, conf, node, int(hardware["CPUs"]), {})
    try:
        slurm.daemons["munged"] = _start(
            "munged",
            ["--foreground", "--force", f"--socket={munge / 'munge.socket'}", f"--key-file={key}",
             f"--pid-file={munge / 'munged.pid'}", f"--seed-file={munge / 'munged.seed'}",
             f"--log-file={root / 'log' / 'munged.log'}"],
            root, env,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not (munge / "munge.socket").exists():
            if slurm.daemons["munged"].poll() is not None or time.monotonic() > deadline:
                raise SlurmStartError(f"munged did not create its socket\n{slurm.log_tails()}")
            time.sleep(0.02)
        for daemon in ("slurmctld", "slurmd"):
            slurm.daemons[daemon] = _start(daemon, ["-D", "-f", str(conf)], root, env)
        while not _idle(slurm):
            if time.monotonic() > deadline:
                state = slurm.run("sinfo", "-h", "-N", "-o", "%N %t %E", check=False)
                raise SlurmStartError(
                    f"the test Slurm's node {node} was not idle within {timeout}s "
                    f"(sinfo: {state.stdout.strip() or state.stderr.strip()})\n{slurm.log_tails()}"
                )
            time.sleep(0.1)
    except BaseException:
        slurm.stop()
        raise
    return slurm


@contextlib.contextmanager
def running_slurm(root: Path) -> Iterator[Slurm]:
    """A test Slurm for the ``with`` block; its jobs are cancelled and its daemons stopped at the end."""
    slurm = start_slurm(root)
    try:
        yield slurm
    finally:
        try:
            slurm.cancel_all()
        finally:
            slurm.stop()
