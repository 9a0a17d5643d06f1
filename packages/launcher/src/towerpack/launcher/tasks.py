"""What a node runs and how each of its processes ended: ``TaskId``, ``Task`` and ``Exit``.

These travel between node launchers (see :mod:`towerpack.launcher.protocol`), so they hold only
plain values.
"""

from __future__ import annotations

import enum
import re
import signal
from dataclasses import dataclass, field

_TASK_TEXT = re.compile(r"(ps)?([0-9]+)", re.ASCII)


class TaskKind(enum.Enum):
    """A worker has a ``RANK``; a parameter server (``--ps``) serves variables and has none."""

    WORKER = "worker"
    PS = "ps"


@dataclass(frozen=True)
class TaskId:
    """Which task: worker rank ``index``, or parameter server ``index``.

    Its text (``str``) is what users see in output prefixes, ``--ranks`` and the error file: ``3``
    for rank 3, ``ps0`` for parameter server 0; ``parse`` reads it back.
    """

    kind: TaskKind
    index: int

    def __post_init__(self) -> None:
        if not isinstance(self.kind, TaskKind):
            raise TypeError(f"TaskId kind must be a TaskKind, got {self.kind!r}")
        if not isinstance(self.index, int) or isinstance(self.index, bool) or self.index < 0:
            raise ValueError(f"TaskId index must be an integer >= 0, got {self.index!r}")

    @classmethod
    def worker(cls, rank: int) -> TaskId:
        return cls(TaskKind.WORKER, rank)

    @classmethod
    def ps(cls, index: int) -> TaskId:
        return cls(TaskKind.PS, index)

    @classmethod
    def parse(cls, text: str) -> TaskId:
        """``"3"`` is rank 3, ``"ps0"`` parameter server 0; anything else is a ValueError naming it."""
        match = _TASK_TEXT.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise ValueError(f"expected a rank like 3 or a parameter server like ps0, got {text!r}")
        return cls(TaskKind.PS if match[1] else TaskKind.WORKER, int(match[2]))

    def __str__(self) -> str:
        return f"ps{self.index}" if self.kind is TaskKind.PS else str(self.index)

    def describe(self) -> str:
        """``rank 3`` or ``parameter server 0``, for sentences."""
        return f"parameter server {self.index}" if self.kind is TaskKind.PS else f"rank {self.index}"


@dataclass(frozen=True)
class Task:
    """One process to run, and the environment it runs with (on top of the node launcher's own)."""

    id: TaskId
    env: dict[str, str] = field(default_factory=dict)

    @property
    def kind(self) -> TaskKind:
        return self.id.kind


def describe_code(code: int) -> str:
    """``exit code N`` or ``killed by SIGNAME`` for a return code (negative: killed by that signal)."""
    if code >= 0:
        return f"exit code {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


def exit_status(code: int) -> int:
    """The shell convention for a return code: the code itself, or 128+N for a death by signal N."""
    return 128 - code if code < 0 else code


@dataclass(frozen=True)
class Exit:
    """How one task ended.

    ``code`` is the process's return code (negative: killed by that signal); ``time`` is when its
    node saw it end (``time.time()`` there); ``attempt`` is the attempt it belonged to; ``tail`` the
    last lines of its stderr.
    """

    task: TaskId
    host: str
    code: int
    tail: tuple[str, ...] = ()
    time: float = 0.0
    attempt: int = 0

    @property
    def kind(self) -> TaskKind:
        return self.task.kind

    def describe(self) -> str:
        return describe_code(self.code)

    @property
    def exit_status(self) -> int:
        return exit_status(self.code)


@dataclass(frozen=True)
class StopRequest:
    """How to stop a node's processes.

    ``signal`` None: SIGTERM to every process of the job, SIGKILL after ``grace`` seconds (a failed or
    finished job). Otherwise ``signal`` goes to each worker as it came to the launcher (pre-emption);
    workers get ``grace`` seconds to checkpoint and exit, then parameter servers and anything left
    are stopped.
    """

    signal: int | None
    grace: float
