"""What a node runs and how each of its processes ended: ``Task``, ``TaskKind`` and ``Exit``.

These travel between node launchers (see :mod:`towerpack.launcher.protocol`), so they hold only
plain values.
"""

from __future__ import annotations

import enum
import signal
from dataclasses import dataclass, field


class TaskKind(enum.Enum):
    """A worker has a ``RANK``; a parameter server (``--ps``) serves variables and has none."""

    WORKER = "worker"
    PS = "ps"


@dataclass(frozen=True)
class Task:
    """One process to run: ``name`` is the rank ("0", "1", ...) or "ps<i>" for a parameter server."""

    name: str
    kind: TaskKind
    env: dict[str, str] = field(default_factory=dict)


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

    task: str
    kind: TaskKind
    host: str
    code: int
    tail: tuple[str, ...] = ()
    time: float = 0.0
    attempt: int = 0

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
