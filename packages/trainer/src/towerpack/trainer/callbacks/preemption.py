"""Checkpoint and stop when the process is told to stop: the hook pre-emption needs.

Schedulers ask a training to end with a signal (Slurm's ``--signal``, Kubernetes and spot-instance
terminations, ``scancel``); ``launch`` passes SIGTERM, SIGINT, SIGHUP, SIGUSR1 and SIGUSR2 on to every
rank as it received them and waits ``--grace-period`` seconds. ``PreemptionSaver``, one of the default
callbacks, turns such a signal into: finish the current step, save a checkpoint, stop training. The
same command then resumes from that checkpoint with ``AutoResumeTrainConfig``.
"""

from __future__ import annotations

import signal
import time

from .. import logger
from ..callback import Callback
from ..compat import tf, tfv1
from ..signal_handlers import STOP_SIGNALS, StopSignalHandlers
from ..stop_training import StopTraining
from .saver import ModelSaver

__all__ = ["STOP_SIGNALS", "VOTE_EVERY_S", "PreemptionSaver"]

# The all-reduce ops of the trainers whose ranks vote (Horovod's, TensorFlow's collective).
_ALLREDUCE_OPS = ("HorovodAllreduce", "CollectiveReduceV2")

#: How often the ranks compare their stop requests (seconds of steps), and the most steps apart.
VOTE_EVERY_S = 0.2
MAX_VOTE_INTERVAL = 1000


class PreemptionSaver(Callback):
    """On a stop signal, finish the current step, save a checkpoint and end training.

    When one of ``signals`` arrives, the step that is running completes; then the chief saves a
    checkpoint through the job's ``ModelSaver`` (the last one registered; none: training stops
    without one) and training ends as with ``StopTraining``: every callback's ``after_train`` runs
    and the script continues after ``launch_train_with_config``. A signal during the last step of an
    epoch lets that epoch finish (its statistics recorded) and stops as the next one begins (callbacks
    registered before this one see its ``before_epoch``), so a resumed run starts at the next epoch;
    a checkpoint from the middle of an epoch resumes that epoch at the saved global step. A second
    SIGINT raises ``KeyboardInterrupt`` as usual.

    All processes of a job stop after the same step: Horovod and collective ranks agree on it through
    a small all-reduce (``trainer.allreduce_sum``) fetched with a step about every ``vote_every_s``
    seconds (at steps they agree on; 0: every step), so a stop comes within that time of the signal;
    TF-server workers stop together through their synchronous step.

    Only signals whose handler is Python's default are taken (a handler of your own, or a signal set
    to be ignored, stays as it was); the previous handlers are restored after training. Handlers can
    only be installed from the main thread. Runs on every process (not only the chief).

    Attributes: ``received`` (the first signal, or None) and ``saved`` (the checkpoint's path, or None).
    """

    _chief_only = False

    def __init__(self, signals=STOP_SIGNALS, vote_every_s: float = VOTE_EVERY_S):
        self.signals = tuple(signals)
        self.vote_every_s = float(vote_every_s)
        self._next_vote = 0
        self._last_vote: tuple[float, int] | None = None
        self.received: int | None = None
        self.saved: str | None = None
        self._handlers = StopSignalHandlers(self._handle, self.signals)
        self._agreed = 0
        self._stop_at_epoch_end = False

    # -- graph and handlers --------------------------------------------------------------------------
    def _setup_graph(self):
        self._vote = None
        if self.trainer.size > 1:
            # Each rank feeds whether it was told to stop; the sum, fetched with the step, is the same on
            # every rank, so all of them stop after the same step. Asked for once the step's gradients
            # are ready for their own all-reduce, and in their dtype, Horovod fuses it with them: no
            # extra collective per step.
            grads = [op.inputs[0] for op in self.graph.get_operations() if op.type in _ALLREDUCE_OPS]
            dtype = grads[0].dtype if grads and grads[0].dtype.is_floating else tf.float32
            # [wants to stop, the step interval to the next vote (rank 0 proposes it; others send 0)]
            self._wants = tfv1.placeholder_with_default(tf.zeros([2], dtype), [2], name="stop_requested")
            with tf.control_dependencies(grads):
                wants = tf.identity(self._wants)
            # None: the trainer's processes have no all-reduce (TF-server workers stop through their step).
            self._vote = self.trainer.allreduce_sum(wants, name="PreemptionVote")
            self._is_rank0 = self.trainer.is_chief

    def _takes_part_in_runs(self) -> bool:
        # Only the ranks' vote is fetched with steps; alone, a process checks its flag per step.
        return self._vote is not None

    def _before_train(self):
        if not self._handlers.install():
            logger.warning("PreemptionSaver: not in the main thread, so no signal handlers are installed")

    def _regrouped(self):
        # Every rank votes at the next step, a joining one included, and takes the interval from there.
        self._next_vote, self._last_vote = 0, None

    def _handle(self, signum, _frame):
        if self.received is None:
            self.received = signum

    # -- the loop ------------------------------------------------------------------------------------
    def _before_run(self, ctx):
        if self._vote is None or self.global_step < self._next_vote:
            return None
        wanted = 0 if self.received is None else 1
        self._voting_at = self.global_step
        interval = self._propose_interval() if self._is_rank0 else 0
        return tfv1.train.SessionRunArgs(fetches=self._vote, feed_dict={self._wants: [wanted, interval]})

    def _propose_interval(self) -> int:
        """Steps until the next vote: about ``vote_every_s`` seconds of steps (1 to 1000)."""
        now, step = time.monotonic(), self.global_step
        last = self._last_vote
        self._last_vote = (now, step)
        if last is None or step <= last[1] or self.vote_every_s <= 0:
            return 1
        per_step = (now - last[0]) / (step - last[1])
        return int(min(max(round(self.vote_every_s / max(per_step, 1e-6)), 1), MAX_VOTE_INTERVAL))

    def _after_run(self, run_context, run_values):
        if self._vote is not None and run_values.results is not None:
            stop, interval = (round(float(v)) for v in run_values.results)
            self._agreed = stop
            self._next_vote = self._voting_at + max(interval, 1)

    def _stop_requested(self) -> bool:
        return self._agreed > 0 if self._vote is not None else self.received is not None

    def _trigger_step(self):
        if not self._stop_requested():
            return
        if self.local_step == self.trainer.steps_per_epoch - 1:
            self._stop_at_epoch_end = True  # let the epoch end and record its statistics first
            return
        self._save_and_stop()

    def _before_epoch(self):
        if self._stop_at_epoch_end:
            self._save_and_stop()

    def _after_train(self):
        self._handlers.restore()
        # Stopped another way after the request (the last epoch ended, another TF-server worker
        # stopped first): the checkpoint is still owed.
        if self.received is not None or self._stop_requested():
            self._save()

    def _save_and_stop(self):
        self._save()
        name = signal.Signals(self.received).name if self.received else "a stop request of another rank"
        raise StopTraining(f"received {name}")

    def _save(self) -> None:
        if not self.trainer.is_chief or self.saved is not None:
            return
        saver = _model_saver(self.trainer)
        if saver is None:
            logger.warning("Stopping on request without a checkpoint: no ModelSaver is registered")
            self.saved = ""
            return
        step = self.global_step
        if saver.latest is not None and saver.latest.endswith(f"-{step}"):  # this step's exists
            self.saved = saver.latest
            return
        logger.info("Stop requested: saving a checkpoint at global_step %d", step)
        self.saved = saver.save() or ""


def _model_saver(trainer) -> ModelSaver | None:
    """The last ModelSaver among the trainer's callbacks, looking inside wrappers (``.cb``)."""
    found = None
    for cb in trainer.registered_callbacks():
        while cb is not None and not isinstance(cb, ModelSaver):
            cb = getattr(cb, "cb", None)
        if cb is not None:
            found = cb
    return found
