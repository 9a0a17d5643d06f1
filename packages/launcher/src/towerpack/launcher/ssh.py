"""The ssh command that starts a node's agent on another host, with our working directory and environment."""

from __future__ import annotations

import os
import queue
import re
import shlex
import subprocess
import sys
import threading
import time

from towerpack.launcher.events import NodeLost
from towerpack.launcher.hosts import HostSlots
from towerpack.launcher.job_secret import SECRET_VAR
from towerpack.launcher.net import host_port
from towerpack.launcher.output import StreamCopier
from towerpack.launcher.spec import LaunchSpec
from towerpack.launcher.tagging import TAG_VAR

# Variables that describe this shell or this login rather than the job; the remote login sets its own.
_NOT_CARRIED = {
    "HOME",
    "HOSTNAME",
    "LOGNAME",
    "MAIL",
    "OLDPWD",
    "PWD",
    "SHELL",
    "SHLVL",
    "TERM",
    "TMUX",
    "USER",
    "DISPLAY",
    "LS_COLORS",
    "_",
    TAG_VAR,
    SECRET_VAR,
}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def carried_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if _NAME.match(k) and k not in _NOT_CARRIED and not k.startswith(("SSH_", "BASH_FUNC_", "SLURM_"))
    }


def agent_command(spec: LaunchSpec, node: int, hs: HostSlots, control_port: int) -> list[str]:
    """``ssh [opts] host 'cd CWD && exec env K=V ... python -m towerpack.launcher <agent args>'``.

    The job secret is not among them: the agent reads it from its standard input.
    """
    args = [
        "--nnodes", str(spec.nnodes), "--node-rank", str(node),
        "--master", host_port(spec.master_addr, control_port), "--node-addr", hs.host,
        "--agent-slots", str(hs.slots), "--ps", str(spec.n_ps), "--backend", spec.backend.value,
        "--start-timeout", str(spec.start_timeout), "--job-id", spec.job_id,
    ]  # fmt: skip
    if spec.gpus:
        args += ["--gpus", spec.gpus]
    if spec.cpu_bind:
        args.append("--cpu-bind")
    if spec.iface:
        args += ["--network-interface", spec.iface]
    if not spec.output.prefix:
        args.append("--no-prefix")
    if spec.output.ranks is not None:
        args += ["--ranks", ",".join(sorted(map(str, spec.output.ranks)))]
    if spec.output.log_dir:
        args += ["--log-dir", os.path.abspath(spec.output.log_dir)]
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(carried_env().items()))
    remote = f"cd {shlex.quote(os.getcwd())} && exec env {env} " + shlex.join(
        [sys.executable, "-m", "towerpack.launcher", *args, *spec.target]
    )
    # Never prompt; notice a dead host within about a minute (ssh then exits and the job fails).
    cmd = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=15"]
    if spec.ssh.port:
        cmd += ["-p", str(spec.ssh.port)]
    if spec.ssh.key:
        cmd += ["-i", spec.ssh.key]
    for opt in spec.ssh.options:
        cmd += ["-o", opt]
    return [*cmd, hs.host, remote]


class SshAgent:
    """The ssh process running one node's agent. Once the agent has joined, its output is relayed (the
    agent prefixes its ranks' lines itself and passes bar updates on); its stdin carries the job secret,
    then stays open so that the agent sees EOF if this launcher dies."""

    def __init__(
        self,
        spec: LaunchSpec,
        node: int,
        hs: HostSlots,
        control_port: int,
        tag: str,
        events: queue.SimpleQueue,
    ):
        self.host = hs.host
        self.proc = subprocess.Popen(
            agent_command(spec, node, hs, control_port),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(os.environ, **{TAG_VAR: tag}),
            start_new_session=True,
        )
        try:
            self.proc.stdin.write(spec.secret + b"\n")
            self.proc.stdin.flush()
        except OSError:
            pass  # ssh already failed: its exit is reported below
        # Quiet until the agent joins: a failure to start is reported in one line from the tail.
        self.copier = StreamCopier(None, False, None, 5, owner=f"ssh{node}")
        self.copier.attach(self.proc.stdout, self.proc.stderr)
        threading.Thread(target=self._watch, args=(node, events), daemon=True).start()

    def _watch(self, node: int, events: queue.SimpleQueue) -> None:
        self.proc.wait()
        self.copier.join(1.0)
        why = f"its ssh connection ended (ssh exited with code {self.proc.returncode})"
        events.put(NodeLost(node, why, time.time()))

    def show_output(self) -> None:
        """Relay the agent's output from now on (its ranks' lines and its own messages)."""
        self.copier.show = True

    def failure(self) -> str | None:
        """Why the agent is gone (its last stderr line), or None while ssh still runs."""
        if self.proc.poll() is None:
            return None
        self.copier.join(1.0)  # its last words may still be in the pipe
        return self.copier.tail[-1] if self.copier.tail else f"ssh exited with code {self.proc.returncode}"
