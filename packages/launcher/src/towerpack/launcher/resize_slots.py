"""A node's side of resizes in place: the directory of its resize files (:mod:`towerpack.utils.resize_files`),
the variables that point each rank at it, the plans written there, and what the ranks say back (watched, so
that an agent can pass changes to its coordinator)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
from collections.abc import Callable

from towerpack.launcher.tasks import Task, TaskKind
from towerpack.utils import resize_files as rf

__all__ = ["ResizeSlots"]

#: Seconds between two looks at the ranks' files by the watching thread.
WATCH_S = 0.05


class ResizeSlots:
    """The resize files of one node's ranks for one attempt; ``on_change(states)`` is called from a thread
    whenever what the ranks say changes."""

    def __init__(self, on_change: Callable[[tuple[rf.SlotState, ...]], None] | None = None):
        self.directory = tempfile.mkdtemp(prefix="towerpack-resize-")
        self.count = 0
        self._on_change = on_change
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def wanted(tasks: list[Task]) -> bool:
        """Whether the coordinator offers these tasks resizes in place (it then sets the wait variable)."""
        return any(rf.WAIT_VAR in t.env for t in tasks)

    def prepare(self, tasks: list[Task]) -> list[Task]:
        """The tasks with the variables that point their ranks at this node's files, a slot each."""
        workers = [t for t in tasks if t.kind is TaskKind.WORKER]
        self.count = len(workers)
        slot = {t.id: i for i, t in enumerate(workers)}
        out = []
        for t in tasks:
            if t.id in slot:
                env = dict(t.env, **{rf.DIR_VAR: self.directory, rf.SLOT_VAR: str(slot[t.id])})
                t = Task(t.id, env)
            out.append(t)
        if self._on_change is not None and self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="resize-slots", daemon=True)
            self._thread.start()
        return out

    def publish(self, generation: int, tasks: list[Task]) -> None:
        """Write the plan of ``generation``: slot i of this node takes on the environment of ``tasks[i]``."""
        workers = [t for t in tasks if t.kind is TaskKind.WORKER]
        rf.write_plan(self.directory, rf.Plan(generation, {i: dict(t.env) for i, t in enumerate(workers)}))

    def stopping(self) -> None:
        """The ranks are being stopped: one that waits for a plan gives up now."""
        rf.write_stop(self.directory)

    def states(self) -> tuple[rf.SlotState, ...]:
        return tuple(rf.read_slots(self.directory, self.count).values())

    def _watch(self) -> None:
        last = None
        while not self._stop.wait(WATCH_S):
            now = self.states()
            if now != last:
                last = now
                with contextlib.suppress(Exception):  # a lost coordinator: the agent handles that
                    self._on_change(now)

    def close(self) -> None:
        self._stop.set()
        shutil.rmtree(self.directory, ignore_errors=True)
