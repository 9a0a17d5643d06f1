"""The rank's end of its node launcher's resize files (:mod:`towerpack.utils.resize_files`): say whether it
can resize in place, notice a plan between steps, wait for one after a failed collective."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping

from towerpack.utils import resize_files as rf

from .. import logger

__all__ = ["RankChannel"]

#: Seconds between two looks at the plan's file by the watching thread.
WATCH_S = 0.05
#: Seconds a rank whose collective failed waits for a plan when the launcher does not say.
DEFAULT_WAIT_S = 60.0


class RankChannel:
    """This rank's resize files; ``None`` from :meth:`from_env` outside an elastic job that resizes in place.

    A daemon thread looks at the plan's file every ``WATCH_S`` s and sets :attr:`pending` when a plan of a
    later generation is there, so that the training loop pays one ``Event.is_set()`` per step.
    """

    def __init__(self, directory: str, slot: int, generation: int, joining: bool, wait_s: float):
        self.directory, self.slot, self.generation = directory, int(slot), int(generation)
        self.joining, self.wait_s = joining, float(wait_s)
        self.pending = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RankChannel | None:
        env = os.environ if env is None else env
        directory = env.get(rf.DIR_VAR)
        if not directory:
            return None
        try:
            return cls(
                directory,
                int(env.get(rf.SLOT_VAR, "")),
                int(env.get(rf.GENERATION_VAR, "0")),
                env.get(rf.JOIN_VAR) == "1",
                float(env.get(rf.WAIT_VAR, DEFAULT_WAIT_S)),
            )
        except ValueError as e:
            raise ValueError(
                f"{rf.SLOT_VAR}={env.get(rf.SLOT_VAR)!r}, {rf.GENERATION_VAR}={env.get(rf.GENERATION_VAR)!r} "
                f"and {rf.WAIT_VAR}={env.get(rf.WAIT_VAR)!r} must be numbers (the launcher sets them): {e}"
            ) from None

    def report(self, state: rf.RankState, reason: str = "") -> None:
        rf.write_slot(self.directory, rf.SlotState(self.slot, os.getpid(), self.generation, state, reason))

    def refuse(self, reason: str) -> None:
        """Tell the launcher that this rank cannot resize in place (its job restarts on a change)."""
        logger.info("This rank cannot resize in place: %s; a change of nodes restarts the job", reason)
        self.report(rf.RankState.CANNOT, reason)

    def next_plan(self) -> rf.Plan | None:
        """The plan of a later generation than this rank's, if the launcher has written one."""
        try:
            plan = rf.read_plan(self.directory)
        except (OSError, ValueError) as e:
            logger.warning("Cannot read the resize plan: %s", e)
            return None
        return plan if plan is not None and plan.generation > self.generation else None

    def wait_plan(self, timeout: float | None = None) -> rf.Plan | None:
        """Wait up to ``timeout`` s (default: what the launcher set) for a plan; None if none came, or the
        launcher is stopping this rank."""
        deadline = time.monotonic() + (self.wait_s if timeout is None else timeout)
        while True:
            plan = self.next_plan()
            if plan is not None or time.monotonic() >= deadline:
                return plan
            if rf.stopping(self.directory):  # the launcher stops this rank: no plan will come
                return None
            time.sleep(WATCH_S)

    def env_of(self, plan: rf.Plan) -> dict[str, str]:
        """This slot's environment in ``plan``; a clear error when the plan leaves it out."""
        try:
            return plan.slots[self.slot]
        except KeyError:
            raise RuntimeError(
                f"the resize plan of generation {plan.generation} has no place for slot {self.slot} of this "
                "node: this rank leaves the job"
            ) from None

    def taken(self, plan: rf.Plan) -> None:
        """This rank has regrouped as ``plan`` says: it is at the plan's generation and ready again."""
        self.generation = plan.generation
        self.joining = False
        self.pending.clear()
        self.report(rf.RankState.READY)

    # -- watching between steps -------------------------------------------------------------------
    def watch(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="resize-plan-watch", daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        seen = None
        path = os.path.join(self.directory, "plan.json")
        while not self._stopped.wait(WATCH_S):
            try:
                stamp = os.stat(path).st_mtime_ns
            except OSError:
                continue
            if stamp != seen:
                seen = stamp
                if self.next_plan() is not None:
                    self.pending.set()

    def close(self) -> None:
        self._stopped.set()
