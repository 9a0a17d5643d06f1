"""How a job ended: ``JobState``, the ``Failure`` that caused it, the ``RunResult`` with its summary
lines, and the machine-readable error file (``--error-file``) made from it."""

from __future__ import annotations

import enum
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from towerpack.launcher.membership import MembershipChange
from towerpack.launcher.signals import name as signal_name
from towerpack.launcher.tasks import Exit, TaskId, exit_status


class JobState(enum.Enum):
    SUCCEEDED = "succeeded"  # every worker exited with 0
    FAILED = "failed"  # a task failed or a node was lost
    STOPPED = "stopped"  # a signal stopped it (pre-emption, Ctrl-C)
    NOT_STARTED = "not started"  # it could not start (a node did not join, ssh failed, ...)


class FailureKind(enum.Enum):
    TASK = "task"  # a worker or parameter server exited non-zero or was killed
    NODE_LOST = "node lost"  # a node's launcher went silent or its connection ended


@dataclass(frozen=True)
class Failure:
    """One failure: a task's bad exit, or a lost node. ``time`` is when it happened (``time.time()``):
    for a lost node, when it was last heard from."""

    kind: FailureKind
    node: int
    host: str
    time: float
    reason: str
    task: TaskId | None = None
    code: int | None = None
    tail: tuple[str, ...] = ()

    @classmethod
    def of_exit(cls, node: int, ex: Exit) -> Failure:
        return cls(FailureKind.TASK, node, ex.host, ex.time, ex.describe(), ex.task, ex.code, ex.tail)

    @classmethod
    def node_lost(cls, node: int, host: str, why: str, last_heard: float) -> Failure:
        return cls(FailureKind.NODE_LOST, node, host, last_heard, why)

    def name(self) -> str:
        """``rank 1``, ``parameter server 0`` or ``node 1``."""
        return f"node {self.node}" if self.kind is FailureKind.NODE_LOST else self.task.describe()

    def who(self) -> str:
        """``rank 1 on host h``, ``parameter server 0 on host h`` or ``node 1 (h)``."""
        if self.kind is FailureKind.NODE_LOST:
            return f"{self.name()} ({self.host})"
        return f"{self.name()} on host {self.host}"

    @property
    def exit_status(self) -> int:
        """The shell convention for a task (its code, or 128+N for signal N); 1 for a lost node."""
        return 1 if self.code is None else exit_status(self.code)

    def to_json(self) -> dict:
        signalled = self.code is not None and self.code < 0
        return {
            "kind": self.kind.value,
            "rank": None if self.task is None else str(self.task),
            "task_kind": None if self.task is None else self.task.kind.value,
            "node": self.node,
            "host": self.host,
            "exit_code": None if self.code is None or signalled else self.code,
            "signal": signal_name(-self.code) if signalled else None,
            "reason": self.reason,
            "time": self.time,
            "stderr_tail": list(self.tail),
        }


@dataclass(frozen=True)
class RunResult:
    """The outcome of a whole job, as the coordinator reports it."""

    state: JobState
    exit_code: int
    root_cause: Failure | None = None
    others: tuple[Failure, ...] = ()  # failures reported before the stop, after the root cause
    signal: int | None = None  # the signal that stopped the job
    signal_origin: str = ""  # "" (this launcher) or "node N (host)"
    stopped: int = 0  # processes stopped after the root cause
    killed: int = 0  # processes still running at the end of the grace period (SIGKILLed)
    message: str = ""  # why the job did not start
    notes: tuple[str, ...] = ()  # said after the summary
    changes: tuple[MembershipChange, ...] = ()  # an elastic job's membership changes, oldest first

    def summary(self) -> list[str]:
        """The lines the coordinator prints at the end (each after ``launch: ``)."""
        changes = ["membership changes:\n" + "\n".join(f"    {c.describe()}" for c in self.changes)]
        return [*self._summary(), *self.notes, *(changes if self.changes else [])]

    def _summary(self) -> list[str]:
        if self.state is JobState.NOT_STARTED:
            return [self.message]
        if self.state is JobState.STOPPED:
            who = f"{self.signal_origin} " if self.signal_origin else ""
            lines = [f"{who}received {signal_name(self.signal)}; passed it to every worker"]
            if self.killed:
                lines.append(f"{self.killed} process(es) still ran after the grace period and were killed")
            return lines
        if self.state is not JobState.FAILED:
            return []
        cause = self.root_cause
        lines = [f"{cause.who()} failed first ({cause.reason}); stopped the other {self.stopped} process(es)"]
        if cause.kind is FailureKind.TASK:
            if cause.tail:
                lines.append(
                    f"last lines of {cause.name()}'s stderr:\n" + "\n".join(f"    {x}" for x in cause.tail)
                )
            else:
                lines.append(f"{cause.name()} wrote nothing to stderr")
        if self.others:
            then = ", ".join(f"{f.who()} ({f.reason})" for f in self.others)
            lines.append(f"after that, before the job was stopped: {then}")
        return lines

    def report(self, job_id: str) -> dict:
        """The error file's content."""
        return {
            "job_id": job_id,
            "state": self.state.value,
            "exit_code": self.exit_code,
            "message": self.summary()[0] if self.summary() else "",
            "root_cause": self.root_cause.to_json() if self.root_cause else None,
            "other_failures": [f.to_json() for f in self.others],
            "signal": signal_name(self.signal) if self.signal else None,
            "membership_changes": [c.to_json() for c in self.changes],
            "time": time.time(),
        }


def clear_error_file(path: str | None) -> None:
    """A job starting removes the error file an earlier job left."""
    if path:
        Path(path).unlink(missing_ok=True)


def write_error_file(path: str | None, result: RunResult, job_id: str) -> None:
    """Write ``--error-file`` (atomically) unless the job succeeded."""
    if not path or result.state is JobState.SUCCEEDED:
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(result.report(job_id), indent=2) + "\n")
    os.replace(tmp, target)
