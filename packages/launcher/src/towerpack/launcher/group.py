"""The processes of one node for one attempt: start them, report each exit, stop them all."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from towerpack.launcher.output import OutputOptions, StreamCopier, log_paths
from towerpack.launcher.tagging import TAG_VAR, terminate

#: Seconds between SIGTERM and SIGKILL when a job is stopped.
STOP_GRACE_S = 3.0
#: Variables the launcher only guesses: a value the user set on the node wins.
USER_CHOICE = ("HOROVOD_GLOO_IFACE", "NCCL_SOCKET_IFNAME")


@dataclass
class Task:
    """One process to run: ``name`` is the rank ("0", "1", ...) or "ps<i>" for a parameter server."""

    name: str
    kind: str  # "worker" or "ps"
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Exit:
    """How one task ended. ``code`` is the process's return code (negative: killed by that signal);
    ``time`` is when its node saw it end (``time.time()``); ``attempt`` is the attempt it belonged to.
    A task of kind "node" stands for a whole node's launcher: lost (code > 0) or signalled."""

    task: str
    kind: str
    host: str
    code: int
    tail: list[str]
    time: float = 0.0
    attempt: int = 0

    def describe(self) -> str:
        if self.kind == "node" and self.code > 0:
            return "lost contact with its launcher"
        if self.code < 0:
            try:
                name = signal.Signals(-self.code).name
            except ValueError:
                name = f"signal {-self.code}"
            return f"killed by {name}"
        return f"exit code {self.code}"

    @property
    def exit_status(self) -> int:
        """The shell convention: the code itself, or 128+N for a death by signal N."""
        return 128 - self.code if self.code < 0 else self.code

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class LocalGroup:
    """Runs tasks on this machine, each in its own session, all tagged with ``tag``."""

    def __init__(
        self, host: str, argv: list[str], tag: str, output: OutputOptions, on_exit: Callable[[Exit], None]
    ):
        self.host = host
        self.argv = argv
        self.tag = tag
        self.output = output
        self.on_exit = on_exit
        self._procs: list[subprocess.Popen] = []
        self._waiters: list[threading.Thread] = []
        self._stopping = False
        self._attempt = -1
        # Held while reaping a rank and while signalling the groups of ranks not yet reaped.
        self._reap_lock = threading.Lock()

    def start(self, tasks: list[Task], attempt: int) -> None:
        self._stopping = False
        self._attempt = attempt
        with self._reap_lock:
            self._procs = []
        self._waiters = []
        for task in tasks:
            env = dict(os.environ)
            env.update({k: v for k, v in task.env.items() if k not in USER_CHOICE or k not in os.environ})
            env[TAG_VAR] = self.tag
            env["PYTHONUNBUFFERED"] = "1"
            files = log_paths(self.output.log_dir, task.name, attempt) if self.output.log_dir else None
            prefix = f"[{self.host}:{task.name}] ".encode() if self.output.prefix else None
            copier = StreamCopier(prefix, self.output.shows(task.name), files, self.output.tail_lines)
            try:
                proc = subprocess.Popen(
                    self.argv,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                )
            except OSError as exc:
                tail = [f"cannot start {self.argv[0]}: {exc}"]
                self.on_exit(Exit(task.name, task.kind, self.host, 127, tail, time.time(), attempt))
                continue
            copier.attach(proc.stdout, proc.stderr)
            with self._reap_lock:
                self._procs.append(proc)
            waiter = threading.Thread(target=self._wait, args=(task, proc, copier, attempt), daemon=True)
            waiter.start()
            self._waiters.append(waiter)

    def _wait(self, task: Task, proc: subprocess.Popen, copier: StreamCopier, attempt: int) -> None:
        # Wait for the exit without reaping, so that the moment it ended is known before the output
        # drains (a grandchild may hold the pipes open), and the group can still be signalled until
        # the reap below.
        with contextlib.suppress(ChildProcessError):
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        ended = time.time()
        # An exit caused by stop() is not news; one that happened before it is, even if reported after.
        news = not self._stopping
        with self._reap_lock:
            code = proc.wait()
        copier.join(timeout=1.0)
        if news and attempt == self._attempt:
            self.on_exit(Exit(task.name, task.kind, self.host, code, list(copier.tail), ended, attempt))

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        """SIGTERM every process of the group and their descendants; SIGKILL survivors after ``grace``."""
        self._stopping = True
        terminate(self.tag, grace, signal_groups=self._signal_live_groups)
        for waiter in self._waiters:
            waiter.join(timeout=3.0)

    def _signal_live_groups(self, sig: int) -> None:
        """Signal the process group of every rank not yet reaped; a reaped rank's pid may be reused."""
        with self._reap_lock:
            for proc in self._procs:
                if proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, sig)
