"""What a training script tells its user at the start and end of a run that may be resumed.

A job on pre-emptible machines is stopped by a signal and started again with the same command.
:func:`announce_resume` says which checkpoint and epoch a resumed run continues from;
:func:`summarize` says what the run did: finished, or stopped by which signal after which epoch,
the epochs and steps this run trained, and the checkpoint to resume from.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterable

from towerpack.utils.placement import placement

from .callbacks.monitor import JSONWriter
from .callbacks.preemption import PreemptionSaver
from .compat import tfv1
from .interface import launch_train_with_config

__all__ = ["announce_resume", "last_accuracy", "summarize", "train_and_summarize"]


def announce_resume(config) -> int:
    """Print where a resumed run continues (nothing for a new one); return its starting global step."""
    resumed = getattr(config, "resumed_from", None)
    if not resumed:
        return 0
    epochs = config.max_epoch
    if config.starting_epoch > epochs:
        print(f"{resumed} already finished epoch {epochs} of {epochs}: nothing to train", flush=True)
    else:
        print(f"resuming from {resumed} at epoch {config.starting_epoch} of {epochs}", flush=True)
    return int(tfv1.train.load_variable(resumed, "global_step"))


def _stopped_by(config) -> str:
    """How training ended before its last epoch, as the default PreemptionSaver saw it."""
    saver = next((cb for cb in config.extra_callbacks if isinstance(cb, PreemptionSaver)), None)
    if saver is not None and saver.received is not None:
        return f"by {signal.Signals(saver.received).name}"
    if saver is not None and saver.saved is not None:
        return "by another rank's stop request"  # it saved without a signal of its own
    return "early"


def summarize(
    what: str, config, trainer, start_step: int, elapsed: float, details: Iterable[str] = ()
) -> None:
    """Print what the run did (``what``: e.g. "ResNet-18 on 2 process(es)"), ``details`` (e.g. the
    validation accuracy) and the checkpoint to resume from.

    The last finished epoch is the last record of the log directory's ``stats.json``: scripts that
    call this write scalars at epoch ends only.
    """
    stats = JSONWriter.load_existing_json(config.logdir) or []
    epochs = config.max_epoch
    last = stats[-1]["epoch_num"] if stats else 0
    trained = max(0, last - config.starting_epoch + 1)
    ran = f"this run: {trained} epoch(s), {trainer.global_step - start_step} step(s) in {elapsed:.1f} s"
    if last >= epochs:
        print(f"\nTrained {what} for {epochs} epochs ({ran})")
    else:
        print(f"\nStopped {what} {_stopped_by(config)} after epoch {last} of {epochs} ({ran})")
    for line in details:
        print(line)
    print(f"checkpoint: {tfv1.train.latest_checkpoint(config.logdir)}")
    if last < epochs:
        print("run the same command to resume from it (--fresh starts over)")


def last_accuracy(stats: list[dict], error_key: str, label: str) -> list[str]:
    """``["<label>: <1 - last value of error_key>"]`` from stats.json's records, or ``[]``."""
    errors = [s[error_key] for s in stats if error_key in s]
    return [f"{label}: {1.0 - errors[-1]:.4f}"] if errors else []


def train_and_summarize(
    config, trainer, what: str, details: Callable[[list[dict]], Iterable[str]] = lambda stats: ()
) -> None:
    """Train, saying first where a resumed run continues; then, on the chief, :func:`summarize`:
    ``what`` was trained on how many processes or towers, and ``details(stats)`` (stats.json's records)."""
    start_step = announce_resume(config) if trainer.is_chief else 0
    start = time.monotonic()
    launch_train_with_config(config, trainer)
    elapsed = time.monotonic() - start
    if trainer.is_chief:
        world = placement().world_size
        on = f"{world} process(es)" if world > 1 else f"{max(1, len(trainer.devices))} tower(s)"
        stats = JSONWriter.load_existing_json(config.logdir) or []
        summarize(f"{what} on {on}", config, trainer, start_step, elapsed, details(stats))
