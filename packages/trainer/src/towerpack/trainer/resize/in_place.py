"""What the training loop of a rank that resizes in place does: say whether it can, notice a plan between
steps or after a failed collective step, regroup (:mod:`.regroup`) and restart its input at the job's
position for the new membership (:mod:`.input_restart`).

A rank that cannot go on in place (no plan came in time, the plan would change which rank is the chief, the
regroup failed) raises, exits, and its launcher restarts the job from its checkpoint as before.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from towerpack.utils import resize_files as rf

from .. import logger
from ..batch_policy import chosen_policies
from ..compat import tf
from .rank_channel import RankChannel
from .regroup import HorovodRegroup, decode_state, encode_state

__all__ = ["InPlaceResize", "LoopPosition"]


@dataclass(frozen=True)
class LoopPosition:
    """Where the loop goes on after a regroup: the epoch, its steps at the new size, the steps done."""

    epoch: int
    steps_per_epoch: int
    step: int


def collective_failed(error: BaseException) -> bool:
    """Whether a step failed in a collective (a peer gone) rather than in the model."""
    if not isinstance(error, tf.errors.OpError):
        return False
    text = error.message or ""
    return any(s in text for s in ("Horovod", "Gloo", "gloo", "HorovodAllreduce", "HorovodAllgather"))


class InPlaceResize:
    """One rank's resizes in place (see the module); made by a trainer that can regroup."""

    def __init__(self, trainer, channel: RankChannel, regroup: HorovodRegroup):
        self.trainer, self.channel, self.regroup = trainer, channel, regroup
        self.enabled = True
        self.last: dict[str, float] = {}

    def start(self) -> None:
        """Before the first step: tell the launcher whether this rank can resize in place."""
        from .input_restart import why_input_cannot_restart

        why = why_input_cannot_restart(self.trainer) or _why_batch_policy()
        if why:
            self.enabled = False
            self.channel.refuse(why)
            return
        if not self.channel.joining:
            self.channel.report(rf.RankState.READY)
        self.channel.watch()

    def due(self) -> bool:
        return self.enabled and self.channel.pending.is_set()

    def recoverable(self, error: BaseException) -> bool:
        return self.enabled and collective_failed(error)

    def join(self) -> LoopPosition:
        """A joining rank: its graph and session are ready; wait for the plan that takes it in."""
        if not self.enabled:  # it said why; the launcher restarts the job to take the node in
            raise RuntimeError("this rank was started to join the job in place, but it cannot (see above)")
        took = self.regroup.warm_up(self.trainer.sess, self.trainer.run_step)
        logger.info("Joining rank ready (its step warmed up in %.2f s); waiting for the regroup", took)
        self.channel.report(rf.RankState.JOINING)
        plan = self.channel.wait_plan(self.channel.wait_s)
        if plan is None:
            raise RuntimeError(f"no resize plan took this joining rank in within {self.channel.wait_s:g} s")
        return self._take(plan, joining=True)

    def after_failure(self, error: BaseException) -> LoopPosition:
        """A step failed in a collective: wait for the launcher's plan (it has lost a node), then regroup;
        without a plan in time the error stands."""
        logger.warning(
            "A collective step failed (%s); waiting for the launcher's resize plan", _first_line(error)
        )
        plan = self.channel.wait_plan()
        if plan is None:
            logger.error("No resize plan came within %g s", self.channel.wait_s)
            raise error
        return self._take(plan, joining=False)

    def between_steps(self) -> LoopPosition:
        plan = self.channel.next_plan()
        if plan is None:  # the watcher saw one that was since taken
            self.channel.pending.clear()
            return LoopPosition(self.trainer.epoch_num, self.trainer.steps_per_epoch, self.trainer.local_step)
        return self._take(plan, joining=False)

    def _take(self, plan: rf.Plan, joining: bool) -> LoopPosition:
        from .input_restart import restart_input

        trainer = self.trainer
        was_chief = trainer.is_chief
        began = time.perf_counter()
        result = self.regroup.run(trainer.sess, plan, joining, self._step(joining), trainer.epoch_num,
                                  self._state, self._load_state)  # fmt: skip
        if (result.rank == 0) != was_chief and not joining:
            raise RuntimeError(
                f"the resize plan of generation {plan.generation} makes rank {result.rank} the chief; only "
                "the rank that started as the chief can be one (its callbacks save the checkpoints)"
            )
        trainer.rank, trainer.size = result.rank, result.size
        trainer.local_rank = int(self.channel.env_of(plan).get("LOCAL_RANK", trainer.local_rank))
        # The source's step variable: a step that failed in its collective may have counted it already.
        trainer.set_global_step(trainer.global_step_value())
        t = time.perf_counter()
        at = trainer.trainer_position()
        here = (at.steps_per_epoch, at.step_in_epoch)
        steps_per_epoch, step = restart_input(trainer)
        if trainer.position_keeper is None or (steps_per_epoch, step) == here:
            # The bounds did not come from the job's data position: every rank takes the source's loop
            # position (a joining rank's own is where it would have started).
            steps_per_epoch, step = self._source_loop
        self.last = dict(result.phases, input=time.perf_counter() - t, total=time.perf_counter() - began)
        trainer.callbacks_regrouped()
        self.channel.taken(plan)
        logger.info(
            "Resized in place to %d ranks: epoch %d, step %d of %d (%.2f s)",
            result.size, result.epoch, step, steps_per_epoch, self.last["total"],
        )  # fmt: skip
        return LoopPosition(max(result.epoch, 1), steps_per_epoch, step)

    def _step(self, joining: bool) -> int:
        # The steps that succeeded here (the Python counter): the step variable also counts a step whose
        # collective failed, as its increment does not wait for the gradients.
        return -1 if joining else self.trainer.global_step

    def _state(self) -> bytes:
        at = self.trainer.trainer_position()
        parts = {"loop": json.dumps([at.steps_per_epoch, at.step_in_epoch]).encode()}
        keeper = self.trainer.position_keeper
        if keeper is not None:
            parts["position"] = keeper.state_bytes()
        return encode_state(parts)

    def _load_state(self, data: bytes) -> None:
        parts = decode_state(data)
        try:
            steps, step = (int(v) for v in json.loads(parts["loop"]))
            if not 0 <= step <= steps:
                raise ValueError(f"step {step} of {steps}")
        except (KeyError, ValueError, TypeError) as e:
            raise RuntimeError(f"the regroup's source sent no valid loop position ({e!r})") from None
        self._source_loop = steps, step
        keeper = self.trainer.position_keeper
        if keeper is not None:
            if "position" not in parts:
                raise RuntimeError(
                    "the source rank of the regroup tracks no data position, but this one does"
                )
            keeper.load_state_bytes(parts["position"])

    def close(self) -> None:
        self.channel.close()


def _why_batch_policy() -> str | None:
    setups = chosen_policies()
    if not setups:
        return None
    policy = setups[-1].policy
    return (
        f"the script sized its batch and learning rate for the world size (batch_for_world_size, "
        f"{policy.value}), which a restart at the new size does again"
    )


def _first_line(error: BaseException) -> str:
    return (getattr(error, "message", "") or str(error)).strip().splitlines()[0][:200]
