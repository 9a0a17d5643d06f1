"""Which GPUs exist (``nvidia-smi -L``) and which ones ``--gpus`` asks for."""

from __future__ import annotations

import re
import shutil
import subprocess

from towerpack.launcher.errors import UsageError

_GPU_LINE = re.compile(r"^GPU (\d+):")


def detect() -> list[str]:
    """Indices of the GPUs ``nvidia-smi -L`` lists; UsageError when there is none."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise UsageError("no NVIDIA GPU found (nvidia-smi is not installed); use --np N for CPU processes")
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"nvidia-smi -L failed: {exc}") from None
    found = [m.group(1) for m in map(_GPU_LINE.match, out.stdout.splitlines()) if m]
    if out.returncode != 0 or not found:
        reason = (out.stderr or out.stdout).strip().splitlines()[-1:] or ["no GPU listed"]
        raise UsageError(f"no NVIDIA GPU found (nvidia-smi -L: {reason[0]}); use --np N for CPU processes")
    return found


def select(spec: str) -> list[str]:
    """Parse ``--gpus``: ``all`` or a comma list of GPU indices, each checked against the machine's GPUs."""
    spec = spec.strip()
    if spec == "all":
        return detect()
    wanted = [s.strip() for s in spec.split(",")]
    if not all(s.isdigit() for s in wanted):
        raise UsageError(f"--gpus expects 'all' or comma-separated GPU indices like 0,1,2, got {spec!r}")
    if len(set(wanted)) != len(wanted):
        raise UsageError(f"--gpus lists a GPU more than once: {spec!r}")
    present = detect()
    unknown = [g for g in wanted if g not in present]
    if unknown:
        raise UsageError(f"unknown GPU id {', '.join(unknown)} (this machine has GPUs {', '.join(present)})")
    return wanted
