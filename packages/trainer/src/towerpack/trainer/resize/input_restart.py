"""Restarting a running trainer's input in place, for the placement a resize gave the process.

After a regroup the ranks keep their graph and session, and their input goes on as a restart from a
checkpoint at the new world size would: sharded for the new world, at the job's data position, every
item of the epoch trained once (exact resume). What was prefetched but not trained on (in the TF queue,
in the runner's workers) is not in the position, so it is dropped and read again where the new split
puts it. In order:

1. the input source stops reading (``stop_producing``: its thread stopped, its queue emptied);
2. the position keeper says what the job has trained on (another rank's state when the regroup loaded
   one);
3. the DataFlow's runners stop their workers (``reopen``);
4. the keeper goes on with a tracker made anew for the new placement, started at that position;
5. the runners start new workers (forked now, they read the new placement), and the source reads again.

Without exact resume the same happens without 2 and 4: a fresh pass of the new shard.

Every rank (one that joins the job included) gets the same loop bounds back, because they come from the
job's position and the new placement alone when the trainer's epochs are the data's. A failure half-way
leaves the input unusable: the rank then fails, and the job restarts from its checkpoint.
"""

from __future__ import annotations

from typing import Any

from towerpack.dataflow.pipeline.sharding import dataflow_tree
from towerpack.dataflow.resume.protocol import PositionUnsupportedError, StepKind, step_of
from towerpack.dataflow.resume.tracker import PositionTracker

from .. import logger
from ..resume_state import PositionKeeper, position_mode

__all__ = ["InputRestartError", "restart_input", "why_input_cannot_restart"]


class InputRestartError(RuntimeError):
    """The input cannot be restarted in place for the new placement; nothing was stopped."""


def why_input_cannot_restart(trainer) -> str | None:
    """None when every input source of ``trainer`` can be restarted in place; else why not, naming the
    source or stage and what would make it work. A source restarts when it can stop and start reading
    (FeedInput, QueueInput) a DataFlow whose stages in this process hold nothing over from one iteration
    to the next, and whose worker processes can be started again (MultiProcessRunnerZMQ)."""
    sources = trainer.input_sources()
    if not sources:
        return f"{type(trainer).__name__} has no input source set up"
    for source in sources:
        why = _why_source_cannot_restart(source)
        if why is not None:
            return why
    return None


def restart_input(trainer) -> tuple[int, int]:
    """Restart the input of ``trainer`` in place; returns ``(steps_per_epoch, step_in_epoch)``: the steps
    of the current epoch at the new size and how many of them are done.

    Call it between two steps (no run of the trainer's session under way), once ``os.environ`` holds the
    new placement (``RANK``, ``WORLD_SIZE``, ... as ``launch`` sets them), ``trainer.size`` the ranks that
    now train in step, and the position keeper (``trainer.position_keeper``, None without exact resume)
    what the whole job has trained on (``load_state_bytes``). ``trainer.datapoints_trained()`` must go on
    counting from its value now (the loop changes its bounds, not that count).

    When an epoch of the trainer's steps is one data epoch (``steps_per_epoch`` from the DataFlow's
    length), the epoch has as many steps as the rank's new share of a data epoch takes, and as many are
    done as the job's position leaves (as :func:`~towerpack.trainer.resume_state.resume_step` says for a
    restart). Otherwise, and without exact resume, the loop's bounds stay as they are.

    Raises :class:`InputRestartError` (before anything is stopped) when the input cannot restart.
    """
    why = why_input_cannot_restart(trainer)
    if why is not None:
        raise InputRestartError(why)
    sources = trainer.input_sources()
    keeper: PositionKeeper | None = trainer.position_keeper
    tracker = mode = None
    if keeper is not None:
        tracker = PositionTracker.of(keeper.source.ds)  # for the new placement
        mode = position_mode(tracker.world_size, trainer.size)
        why = keeper.why_cannot_restart(tracker.world_size, mode)
        if why is not None:
            raise InputRestartError(why)
    here = trainer.trainer_position()
    dropped = sum(source.stop_producing() for source in sources)
    runners = [r for s in sources for r in _started_runners(s.ds)]
    if keeper is None:
        _restart_runners(runners, start=None)
        bounds = here.steps_per_epoch, here.step_in_epoch
    else:
        trained = trainer.datapoints_trained()
        position = keeper.position(trained)
        follows = keeper.follows_epochs(here.steps_per_epoch) and not position.later

        def start() -> None:
            keeper.restart(tracker, mode, position, trained)

        _restart_runners(runners, start)
        bounds = here.steps_per_epoch, here.step_in_epoch
        if follows and keeper.datapoints_per_epoch() is not None:
            steps = keeper.datapoints_per_epoch() // keeper.datapoints_per_step
            bounds = steps, keeper.steps_done(position, steps)
    for source in sources:
        source.start_producing()
    logger.info(
        "The input restarted in place (%d datapoints prefetched and dropped): epoch of %d steps, %d done",
        dropped,
        *bounds,
    )
    return bounds


def _restart_runners(runners: list[Any], start) -> None:
    """Stop the runners' workers, run ``start`` (the tracker's start, which must come before their
    ``reset_state``), and start new workers."""
    for runner in runners:
        runner.reopen()
    if start is not None:
        start()
    for runner in runners:
        runner.reset_state()


def _why_source_cannot_restart(source) -> str | None:
    name = type(source).__name__
    restarts = callable(getattr(source, "stop_producing", None)) and callable(
        getattr(source, "start_producing", None)
    )
    if not restarts:
        return (
            f"{name} cannot restart its input in place (only FeedInput and QueueInput over a DataFlow can: "
            "a source that holds batches of its own, staged, from a tf.data pipeline or from servers, "
            "cannot drop them); use one of those, or let the job restart from its checkpoint"
        )
    ds = getattr(source, "ds", None)
    if ds is None:
        return f"{name} reads no DataFlow to restart"
    for stage in _stages_in_this_process(ds):
        why = _why_stage_cannot_restart(stage)
        if why is not None:
            return f"{name} reads a DataFlow that cannot restart in place: {why}"
    return None


def _why_stage_cannot_restart(stage) -> str | None:
    name = type(stage).__name__
    if _is_remote(stage):
        return (
            f"{name} reads `dataflow serve` servers, which keep each rank's part of the data themselves; "
            "a job reading servers restarts from its checkpoint"
        )
    if callable(getattr(stage, "reopen", None)):
        return None
    if callable(getattr(stage, "close", None)):
        return (
            f"{name} holds what its close() releases (worker processes, threads, files or connections), "
            "which a restart in place cannot start again; run it inside MultiProcessRunnerZMQ, whose "
            "workers restart"
        )
    if getattr(stage, "endless", False) or hasattr(stage, "held_over"):
        return (
            f"{name} holds datapoints over from one iteration to the next, which a restart would train on "
            "twice; run it inside MultiProcessRunnerZMQ (LocallyShuffleData: or give it exact_epochs=True)"
        )
    return None


def _is_remote(stage) -> bool:
    try:
        return step_of(stage).kind is StepKind.REMOTE
    except PositionUnsupportedError:
        return False


def _stages_in_this_process(df) -> list[Any]:
    """The dataflows of ``df`` that run in this process: all but what restartable runners (those with
    ``reopen``) run in their workers."""
    nodes = list(dataflow_tree(df))
    inside = set()
    for node in nodes:
        if callable(getattr(node, "reopen", None)):
            inside.update(id(d) for d in dataflow_tree(node) if d is not node)
    return [d for d in nodes if id(d) not in inside]


def _started_runners(df) -> list[Any]:
    """The restartable runners of ``df`` whose workers run in this process's care."""
    return [d for d in _stages_in_this_process(df) if callable(getattr(d, "reopen", None)) and d.started]
