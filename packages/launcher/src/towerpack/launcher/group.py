"""The processes of one node for one attempt: start them, report each exit, stop them all."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable

from towerpack.launcher import resources
from towerpack.launcher.job_secret import SECRET_VAR
from towerpack.launcher.output import OutputOptions, StreamCopier, log_paths
from towerpack.launcher.resize_slots import ResizeSlots
from towerpack.launcher.tagging import TAG_VAR, terminate
from towerpack.launcher.tasks import Exit, StopRequest, Task, TaskId, TaskKind
from towerpack.utils.resize_files import SlotState

#: Seconds between SIGTERM and SIGKILL when a job is stopped because it failed or finished.
FAILURE_GRACE_S = 3.0
#: Variables the launcher only guesses: a value the user set on the node wins.
USER_CHOICE = ("HOROVOD_GLOO_IFACE", "NCCL_SOCKET_IFNAME", "HOROVOD_GLOO_TIMEOUT_SECONDS")


class LocalGroup:
    """Runs tasks on this machine, each in its own session, all tagged with ``tag``.

    Each task gets its share of the node's cores (thread-pool variables, and with ``cpu_bind`` the
    cores themselves; see :mod:`towerpack.launcher.resources`).
    """

    def __init__(
        self,
        host: str,
        argv: list[str],
        tag: str,
        output: OutputOptions,
        on_exit: Callable[[Exit], None],
        cpu_bind: bool = False,
        on_ranks: Callable[[tuple[SlotState, ...]], None] | None = None,
    ):
        self.host = host
        self.argv = argv
        self.tag = tag
        self.output = output
        self.on_exit = on_exit
        self.cpu_bind = cpu_bind
        self._cores = resources.usable_cores()
        self._procs: dict[TaskId, tuple[Task, subprocess.Popen]] = {}
        self._waiters: list[threading.Thread] = []
        self._stopping = False
        self._attempt = -1
        self._hurry = threading.Event()
        # Held while reaping a rank and while signalling ranks not yet reaped; notified at each reap.
        self._reaped = threading.Condition()
        self._on_ranks = on_ranks
        #: The attempt's resize files, when the coordinator offers resizes in place.
        self.slots: ResizeSlots | None = None

    def start(self, tasks: list[Task], attempt: int) -> None:
        self._stopping = False
        self._hurry.clear()
        self._attempt = attempt
        with self._reaped:
            self._procs = {}
        self._waiters = []
        if self.slots is not None:
            self.slots.close()
            self.slots = None
        if ResizeSlots.wanted(tasks):
            self.slots = ResizeSlots(self._on_ranks)
            tasks = self.slots.prepare(tasks)
        shares = resources.core_sets(self._cores, max(len(tasks), 1))
        for task, cores in zip(tasks, shares, strict=False):
            env = {k: v for k, v in os.environ.items() if k != SECRET_VAR}
            env.update({k: v for k, v in task.env.items() if k not in USER_CHOICE or k not in os.environ})
            env.update(resources.thread_env(len(cores), os.environ))
            env[TAG_VAR] = self.tag
            env["PYTHONUNBUFFERED"] = "1"
            files = log_paths(self.output.log_dir, task.id, attempt) if self.output.log_dir else None
            prefix = f"[{self.host}:{task.id}] ".encode() if self.output.prefix else None
            copier = StreamCopier(
                prefix, self.output.shows(task.id), files, self.output.tail_lines, owner=str(task.id)
            )
            try:
                proc = self._popen(env, cores if self.cpu_bind else None)
            except OSError as exc:
                tail = (f"cannot start {self.argv[0]}: {exc}",)
                self.on_exit(Exit(task.id, self.host, 127, tail, time.time(), attempt))
                continue
            copier.attach(proc.stdout, proc.stderr)
            with self._reaped:
                self._procs[task.id] = (task, proc)
            waiter = threading.Thread(target=self._wait, args=(task, proc, copier, attempt), daemon=True)
            waiter.start()
            self._waiters.append(waiter)

    def _popen(self, env: dict, cores: list[int] | None) -> subprocess.Popen:
        # The child inherits the affinity of the thread that forks it: set it on this thread only.
        previous = os.sched_getaffinity(0) if cores else None
        if cores:
            os.sched_setaffinity(0, cores)
        try:
            return subprocess.Popen(
                self.argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        finally:
            if previous:
                os.sched_setaffinity(0, previous)

    def _wait(self, task: Task, proc: subprocess.Popen, copier: StreamCopier, attempt: int) -> None:
        # Wait for the exit without reaping, so that the moment it ended is known before the output
        # drains (a grandchild may hold the pipes open), and the group can still be signalled until
        # the reap below.
        with contextlib.suppress(ChildProcessError):
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        ended = time.time()
        # An exit caused by stop() is not news; one that happened before it is, even if reported after.
        news = not self._stopping
        with self._reaped:
            code = proc.wait()
            self._reaped.notify_all()
        copier.join(timeout=1.0)
        if news and attempt == self._attempt:
            self.on_exit(Exit(task.id, self.host, code, tuple(copier.tail), ended, attempt))

    def stop(self, request: StopRequest) -> int:
        """Stop every process of the group (see ``StopRequest``); returns how many workers were still
        running when the grace period of a forwarded signal ended."""
        self._stopping = True
        if self.slots is not None:
            self.slots.stopping()
        killed = 0
        grace = request.grace
        if request.signal is not None:
            self._signal_running(request.signal, TaskKind.WORKER)
            killed = self._wait_workers(request.grace)
            grace = 0.0 if killed else FAILURE_GRACE_S  # then: parameter servers and leftovers
        terminate(self.tag, grace, signal_groups=self._signal_live_groups, hurry=self._hurry)
        for waiter in self._waiters:
            waiter.join(timeout=3.0)
        if self.slots is not None:
            self.slots.close()
            self.slots = None
        return killed

    @property
    def attempt(self) -> int:
        """The attempt whose tasks this group runs (-1 before the first)."""
        return self._attempt

    def resize(self, generation: int, tasks: list[Task]) -> None:
        """Tell this node's ranks of a resize in place: slot i takes on ``tasks[i]``'s environment."""
        if self.slots is None:
            raise RuntimeError("this node's ranks were not started for resizes in place")
        self.slots.publish(generation, tasks)

    def rank_states(self) -> tuple[SlotState, ...]:
        """What this node's ranks last said of resizing in place (nothing: not offered)."""
        return self.slots.states() if self.slots is not None else ()

    def hurry(self) -> None:
        """End the grace period of the stop in progress now."""
        self._hurry.set()

    def _wait_workers(self, timeout: float) -> int:
        """Wait up to ``timeout`` s for the workers to end; the number still running then."""
        deadline = time.monotonic() + timeout
        with self._reaped:
            while True:
                running = [
                    p for t, p in self._procs.values() if t.kind is TaskKind.WORKER and p.returncode is None
                ]
                left = deadline - time.monotonic()
                if not running or left <= 0 or self._hurry.is_set():
                    return len(running)
                self._reaped.wait(min(left, 0.2))

    def _signal_running(self, sig: int, kind: TaskKind) -> None:
        """Send ``sig`` to each running task of ``kind`` (the process the launcher started)."""
        with self._reaped:
            for task, proc in self._procs.values():
                if task.kind is kind and proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, sig)

    def _signal_live_groups(self, sig: int) -> None:
        """Signal the process group of every rank not yet reaped; a reaped rank's pid may be reused."""
        with self._reaped:
            for _, proc in self._procs.values():
                if proc.returncode is None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, sig)
