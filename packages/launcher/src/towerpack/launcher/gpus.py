"""Which GPUs exist (``nvidia-smi -L``, narrowed by an inherited CUDA_VISIBLE_DEVICES) and which ones
``--gpus`` asks for."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from towerpack.launcher.errors import UsageError

_GPU_LINE = re.compile(r"^GPU (\d+):")


def detect(path: str | None = None) -> list[str]:
    """Indices of the GPUs ``nvidia-smi -L`` lists (found on ``path``); UsageError when there is none."""
    exe = shutil.which("nvidia-smi", path=path)
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


def visible(env: dict | None = None) -> list[str]:
    """The devices this launcher may hand out, each as a value for a rank's CUDA_VISIBLE_DEVICES.

    With CUDA_VISIBLE_DEVICES set (a scheduler's allocation, a restricted shell), those entries in their
    order, as CUDA itself would number them; otherwise every GPU ``nvidia-smi -L`` lists.
    """
    env = os.environ if env is None else env
    present = detect(env.get("PATH"))  # a machine without GPUs is an error whatever the variable says
    inherited = env.get("CUDA_VISIBLE_DEVICES")
    if inherited is None:
        return present
    allowed = [d.strip() for d in inherited.split(",") if d.strip()]
    if not allowed:
        raise UsageError("CUDA_VISIBLE_DEVICES is set but empty, so no GPU is visible; use --np N")
    return allowed


def select(spec: str, env: dict | None = None) -> list[str]:
    """Parse ``--gpus``: ``all`` or a comma list of indices into the visible devices (see ``visible``)."""
    env = os.environ if env is None else env
    spec = spec.strip()
    wanted = [s.strip() for s in spec.split(",")]
    if spec != "all" and not all(s.isdigit() for s in wanted):
        raise UsageError(f"--gpus expects 'all' or comma-separated GPU indices like 0,1,2, got {spec!r}")
    if len(set(wanted)) != len(wanted):
        raise UsageError(f"--gpus lists a GPU more than once: {spec!r}")
    devices = visible(env)
    if spec == "all":
        return devices
    unknown = [g for g in wanted if int(g) >= len(devices)]
    if unknown:
        ids = ", ".join(map(str, range(len(devices))))
        where = (
            f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']} makes GPUs {ids} visible"
            if "CUDA_VISIBLE_DEVICES" in env
            else f"this machine has GPUs {ids}"
        )
        raise UsageError(f"unknown GPU id {', '.join(unknown)} ({where})")
    return [devices[int(g)] for g in wanted]
