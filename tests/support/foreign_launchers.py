"""Running test processes under launchers other than ours: a clean environment and mpirun's command."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
# Variables by which a launcher tells a process its place: none may leak in from where the tests run.
PLACEMENT_VARS = frozenset({
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK", "MASTER_ADDR",
    "MASTER_PORT", "TF_CONFIG", "TOWERPACK_JOB_ID", "MPI_LOCALRANKID", "MPI_LOCALNRANKS",
})  # fmt: skip
PLACEMENT_PREFIXES = ("HOROVOD_", "OMPI_", "PMI_", "PMIX_", "SLURM_", "TORCHELASTIC_")


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without any launcher's placement variables, with tests/ importable."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in PLACEMENT_VARS and not k.startswith(PLACEMENT_PREFIXES)
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.update(extra)
    return env


def require(reason: str | None) -> None:
    """Skip for a missing tool; in CI, where every test must run, fail."""
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def mpirun_command(np: int) -> list[str]:
    """Open MPI's ``mpirun -np N``, allowed as root (harmless otherwise) and past the core count."""
    found = shutil.which("mpirun")
    require(None if found else "mpirun is not installed (scripts/system_deps.sh installs Open MPI)")
    return [found, "-np", str(np), "--oversubscribe", "--allow-run-as-root"]
