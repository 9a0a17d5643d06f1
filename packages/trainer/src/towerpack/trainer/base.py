"""The Trainer: the per-process training loop, its callbacks and its sessions.

Training runs ``for epoch in starting_epoch..max_epoch (inclusive): for step in
range(steps_per_epoch): run_step()`` with callbacks around every part. A trainer is made by
building a graph and saying what one step is: set ``train_op``, or override ``run_step``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from types import ModuleType

from towerpack.utils.placement import placement

from . import logger
from .callback import Callback
from .callbacks.group import Callbacks
from .callbacks.monitor import MonitorBase, Monitors
from .callbacks.steps import MaintainStepCounter
from .choice import Choice
from .common import get_global_step_var
from .compat import tf, tfv1
from .config import DEFAULT_CALLBACKS, DEFAULT_MONITORS, TrainConfig
from .cpu_kernels import check_cpu_kernels
from .hooked_session import HookedSession
from .input_source.base import InputSource, InputSourceCallback
from .resume_state import PositionKeeper, ResumeRecord, TrainerPosition, resume_step
from .sesscreate import NewSessionCreator, default_session_config
from .sessinit import JustCurrentSession, SessionInit, SmartInit
from .stop_training import StopTraining
from .tower import TowerFunc

# NewSessionCreator, default_session_config and StopTraining are defined in modules of their own
# (sesscreate, stop_training) and importable from here, as they were.
__all__ = ["DataFlowInput", "NewSessionCreator", "StopTraining", "Trainer", "default_session_config"]


class DataFlowInput(Choice):
    """The InputSource a trainer reads a DataFlow through (``apply_default_prefetch``)."""

    FEED = "feed"  # FeedInput: feed_dict, one batch per step
    QUEUE = "queue"  # QueueInput: a thread fills a TF queue the graph dequeues from


def _once(method):
    """Methods of the loop that may run only once per trainer."""
    name = method.__name__

    def wrapper(self, *args, **kwargs):
        if name in self._called:
            raise RuntimeError(f"{type(self).__name__}.{name}() can only be called once")
        self._called.add(name)
        return method(self, *args, **kwargs)

    wrapper.__name__ = name
    wrapper.__doc__ = method.__doc__
    wrapper.__qualname__ = method.__qualname__
    return wrapper


class Trainer:
    """Base class of trainers.

    Attributes available to callbacks:
        config: the TrainConfig given to the constructor (older style), else None.
        sess: the plain session. hooked_sess: a MonitoredSession whose hooks are the callbacks;
        only its runs fire ``before_run``/``after_run`` and count as a global step.
        epoch_num: the current epoch (1-based; ``starting_epoch - 1`` before training).
        local_step: the step within the epoch (0-based; -1 before the first step).
        epoch_start_step: the step the current epoch started at: 0, except in an epoch resumed in its
        middle (``exact_resume``), whose steps are ``epoch_start_step .. steps_per_epoch-1``.
        global_step: number of hooked runs so far, including those of earlier (resumed) runs.
        steps_per_epoch, starting_epoch, max_epoch: the loop's bounds; starting_step: the step the
        first epoch starts at (0 unless it resumes in its middle).
        monitors: where callbacks report scalars and summaries.

    Callbacks may add a short note to the line that logs the end of an epoch with
    ``add_epoch_note`` (from ``after_epoch``), and find the trainer's inputs with ``input_sources()``
    and its callbacks with ``registered_callbacks()``. What else they may ask of any trainer is
    declared below with its default (``is_chief``, ``devices``, ``hvd``, ``size``, ``tower_func``,
    ``training_vs_name()``, ``allreduce_sum()``, ...); trainers that have more override it.

    Older scripts pass a TrainConfig to the constructor and call ``train()`` without arguments;
    that goes through ``launch_train_with_config`` as well.
    """

    #: Whether input sources this trainer sets up measure how long steps wait for them
    #: (``InputWaitTracker`` reports it); False leaves their timing ops out of the graph.
    measure_input_wait = True

    # ---- what callbacks may ask of any trainer (subclasses that have more set these) --------------
    #: The InputSource ``apply_default_prefetch`` wraps a DataFlow in for this trainer.
    default_input = DataFlowInput.QUEUE
    #: One device name per training tower of this process; empty: one tower on the default device.
    devices: Sequence[str] = ()
    #: Stage each tower's batch on its GPU one step ahead (``StagingInput``) when there are several.
    gpu_prefetch = False
    #: ``horovod.tensorflow`` when the ranks of the job all-reduce through Horovod, else None.
    hvd: ModuleType | None = None
    #: How many processes train in step with this one (Horovod or collective ranks); 1 alone.
    size = 1
    #: The function that builds one training tower, for trainers built from one (TowerTrainer).
    tower_func: TowerFunc | None = None
    _is_chief: bool | None = None

    @property
    def replicas(self) -> int:
        """How many batches one step trains on: the processes in step times this process's towers."""
        return self.size * max(1, len(self.devices))

    def __init__(self, config=None):
        if config is not None and not isinstance(config, TrainConfig):
            raise TypeError(f"{type(self).__name__}(config) takes a TrainConfig, got {type(config).__name__}")
        self.config = config
        self._callback_list: list[Callback] = []
        self._callbacks: Callbacks | None = None
        self._called: set[str] = set()
        self.train_op = None
        self.sess = None
        self.hooked_sess = None
        self.monitors = None
        self._global_step = 0
        self.epoch_num = 0
        self.local_step = -1
        self.steps_per_epoch = None
        self.starting_epoch = 1
        self.max_epoch = None
        self._epoch_notes: list[str] = []
        self.epoch_start_step = 0
        self.starting_step = 0
        self._epoch_steps_done = 0
        #: Position tracking (``exact_resume``): the data's tracker and this run's count; None when off.
        self.position_keeper: PositionKeeper | None = None
        #: Resizes in place (an elastic job's HorovodTrainer), or None.
        self.resize = None

    @property
    def global_step(self) -> int:
        return self._global_step

    @property
    def is_chief(self) -> bool:
        """Whether this process writes logs and checkpoints and runs chief-only callbacks: rank 0 of
        the job as the launcher placed it (``towerpack.utils.placement``), or a process run alone.
        Distributed trainers set it from their own view of the job."""
        if self._is_chief is None:
            self._is_chief = placement().is_chief
        return self._is_chief

    @is_chief.setter
    def is_chief(self, value: bool) -> None:
        self._is_chief = bool(value)

    def allreduce_sum(self, tensor, name: str | None = None):
        """``tensor`` summed over the processes that train in step with this one (``size``), as an op
        every process must run in the same steps; None for trainers of one process."""
        return None

    def allgather(self, tensor, name: str | None = None):
        """Every process's ``tensor`` (of one shape in all), concatenated along the first dimension in
        an order all of them agree on, as an op every process must run in the same steps; None for
        trainers of one process."""
        return None

    def training_vs_name(self, device: int = 0) -> str:
        """The variable scope of the training tower on ``device``, whose variables a prediction tower
        reuses: the root scope ("") for a trainer without towers."""
        return ""

    def registered_callbacks(self) -> list[Callback]:
        """The callbacks registered so far, in order, as they were registered (wrappers included)."""
        return list(self._callback_list)

    # ---- callbacks ---------------------------------------------------------------------------
    def register_callback(self, cb) -> bool | list[bool]:
        """Register a callback (or a list) before ``setup_callbacks``; returns whether it was kept
        (chief-only callbacks are dropped on non-chief processes)."""
        if isinstance(cb, (list, tuple)):
            return [self.register_callback(c) for c in cb]
        if not isinstance(cb, Callback):
            raise TypeError(f"register_callback takes a Callback, got {type(cb).__name__}")
        if self._callbacks is not None:
            raise RuntimeError(f"cannot register {cb} after the callbacks were set up")
        if not self.is_chief and cb.chief_only:
            logger.info("Callback %s is chief-only and is skipped on this process", cb)
            return False
        self._callback_list.append(cb)
        return True

    @_once
    def setup_callbacks(self, callbacks: list, monitors: list) -> None:
        """Register the step counter, the callbacks and the monitors, and let them set up the graph."""
        for name, items in (("callbacks", callbacks), ("monitors", monitors)):
            if not isinstance(items, (list, tuple)):
                raise TypeError(f"{name} must be a list, got {type(items).__name__}")
        for cb in callbacks:
            if isinstance(cb, MonitorBase):
                raise TypeError(f"{cb} is a monitor; pass it in monitors=, not callbacks=")
        self.register_callback(MaintainStepCounter())
        self.register_callback(list(callbacks))
        kept = [m for m in monitors if self.register_callback(m)]
        self.monitors = Monitors(kept)
        self.register_callback(self.monitors)
        self._callbacks = Callbacks(self._callback_list)
        self._callbacks.setup_graph(self)

    def input_sources(self) -> list[InputSource]:
        """The input sources whose callbacks are registered (a wrapping source and the one it wraps
        are both listed)."""
        return [cb.source for cb in self._callback_list if isinstance(cb, InputSourceCallback)]

    def add_epoch_note(self, note: str) -> None:
        """Append ``note`` to the log line of the current epoch's end (call it from ``after_epoch``)."""
        self._epoch_notes.append(str(note))

    # ---- session -----------------------------------------------------------------------------
    @_once
    def initialize(self, session_creator, session_init) -> None:
        """Create the session and the hooked session, initialize variables, finalize the graph."""
        if not isinstance(session_creator, tfv1.train.SessionCreator):
            raise TypeError(
                f"session_creator must be a tf.compat.v1.train.SessionCreator, got {session_creator!r}"
            )
        session_init = SmartInit(session_init)
        if not isinstance(session_init, SessionInit):
            raise TypeError(f"session_init must be a SessionInit, got {session_init!r}")
        session_init._setup_graph()
        self._before_session_creation()
        check_cpu_kernels(tfv1.get_default_graph(), getattr(session_creator, "config", None))
        logger.info("Creating the session ...")
        self.sess = session_creator.create_session()
        # Finalized before the MonitoredSession exists, so closing it does not un-finalize the graph.
        self.sess.graph.finalize()
        hooks = self._callbacks.get_hooks() if self._callbacks is not None else []
        self.hooked_sess = HookedSession(self.sess, hooks)
        if self.is_chief:
            session_init._run_init(self.sess)
        elif not isinstance(session_init, JustCurrentSession):
            logger.warning("session_init runs on the chief only; this process waits for variables from it")
        self._after_session_creation()

    def _before_session_creation(self) -> None:
        """Subclasses: last chance to add ops to the graph (it is finalized when the session exists)."""

    def _after_session_creation(self) -> None:
        """Subclasses: runs right after variables are initialized (e.g. to broadcast them); no new ops."""

    # ---- position (exact resume) ----------------------------------------------------------------
    def trainer_position(self) -> TrainerPosition:
        """Where the loop stands now: global step, epoch, and steps of the epoch done."""
        epoch = max(self.epoch_num, self.starting_epoch)
        return TrainerPosition(self.global_step, epoch, self._epoch_steps_done, self.steps_per_epoch or 0)

    def datapoints_trained(self) -> int:
        """Datapoints this process trained on since the loop started (one per tower and step)."""
        if self.epoch_num < self.starting_epoch:
            return 0
        epochs = self.epoch_num - self.starting_epoch
        steps = epochs * self.steps_per_epoch + self._epoch_steps_done - self.starting_step
        return steps * max(1, len(self.devices))

    def resume_record(self) -> ResumeRecord | None:
        """What a checkpoint saved now records of where training stands (None: tracking is off)."""
        if self.position_keeper is None:
            return None
        return self.position_keeper.record(self.trainer_position(), self.datapoints_trained())

    def _start_position_tracking(
        self, resume_from: ResumeRecord | None, steps_per_epoch: int, starting_epoch: int
    ) -> tuple[int, int]:
        """Start the tracker of the input's DataFlow (before the DataFlow is reset) where
        ``resume_from`` left the data; returns the ``(epoch, step)`` the loop starts at."""
        keeper = self.position_keeper
        if resume_from is None:
            keeper.start(None)
            return starting_epoch, 0
        epoch, step = resume_step(resume_from, keeper, int(steps_per_epoch))
        keeper.start(resume_from.data)
        old = resume_from.trainer
        logger.info(
            "Resuming epoch %d at step %d of %d (global_step %d; saved at step %d of %d; %d -> %d ranks)",
            epoch,
            step,
            steps_per_epoch,
            old.global_step,
            old.step_in_epoch,
            old.steps_per_epoch,
            resume_from.world_size,
            keeper.world_size,
        )
        return epoch, step

    # ---- the loop ----------------------------------------------------------------------------
    def run_step(self) -> None:
        """One training step: runs ``train_op`` through the hooked session. Override to do more."""
        if self.train_op is None:
            raise RuntimeError(
                f"{type(self).__name__} has no train_op: set trainer.train_op or override run_step()"
            )
        self.hooked_sess.run(self.train_op)

    @_once
    def main_loop(
        self, steps_per_epoch: int, starting_epoch: int, max_epoch: int, start_step: int = 0
    ) -> None:
        """Run epochs ``starting_epoch..max_epoch`` (inclusive) of ``steps_per_epoch`` steps; the first
        one from step ``start_step`` (a resumed epoch)."""
        steps_per_epoch, starting_epoch, max_epoch = int(steps_per_epoch), int(starting_epoch), int(max_epoch)
        start_step = int(start_step)
        if steps_per_epoch < 0 or starting_epoch < 1 or not 0 <= start_step <= max(0, steps_per_epoch - 1):
            raise ValueError(
                f"bad loop bounds: steps_per_epoch={steps_per_epoch}, starting_epoch={starting_epoch}, "
                f"start_step={start_step}"
            )
        self.steps_per_epoch, self.starting_epoch, self.max_epoch = steps_per_epoch, starting_epoch, max_epoch
        self.epoch_num = starting_epoch - 1
        self.local_step = -1
        self.starting_step = self._epoch_steps_done = start_step
        callbacks = self._callbacks
        with self.sess.as_default():
            try:
                callbacks.before_train()
                if self.global_step:
                    logger.info("Starting at epoch %d, global_step %d", starting_epoch, self.global_step)
                resize = self.resize
                if resize is not None:
                    resize.start()
                    if resize.channel.joining:
                        at = resize.join()
                        starting_epoch, start_step, self.steps_per_epoch = (
                            at.epoch,
                            at.step,
                            at.steps_per_epoch,
                        )
                epoch = starting_epoch
                while epoch <= max_epoch:
                    self.epoch_num = epoch
                    first = start_step if epoch == starting_epoch else 0
                    self.epoch_start_step = self._epoch_steps_done = first
                    logger.info("Start epoch %d%s ...", self.epoch_num, f" at step {first}" if first else "")
                    callbacks.before_epoch()
                    start = time.perf_counter()
                    step = first
                    while step < self.steps_per_epoch:
                        self.local_step = step
                        if self.hooked_sess.should_stop():
                            logger.info("The hooked session asked to stop; training ends")
                            return
                        if resize is not None and resize.due():
                            step = self._resized(resize.between_steps())
                            continue
                        try:
                            self.run_step()
                        except tf.errors.OpError as e:
                            if resize is None or not resize.recoverable(e):
                                raise
                            step = self._resized(resize.after_failure(e))
                            continue
                        step += 1
                        self._epoch_steps_done = step
                        callbacks.trigger_step()
                    callbacks.after_epoch()
                    notes = "".join(f", {n}" for n in self._epoch_notes)
                    self._epoch_notes.clear()
                    logger.info(
                        "Epoch %d (global_step %d) finished, time %.2f s%s",
                        self.epoch_num,
                        self.global_step,
                        time.perf_counter() - start,
                        notes,
                    )
                    callbacks.trigger_epoch()
                    epoch += 1
                logger.info("Training has finished")
            except StopTraining as e:
                logger.info("Training was stopped by StopTraining%s", f": {e}" if str(e) else "")
            except tf.errors.OutOfRangeError:
                try:
                    self._raise_if_input_failed()
                except Exception as e:
                    self._note_failure(e)
                    raise
                logger.info("Training stopped: the input is exhausted")
            except KeyboardInterrupt:
                logger.info("Interrupted (Ctrl-C); cleaning up")
                raise
            except Exception as e:
                self._note_failure(e)
                raise
            finally:
                callbacks.after_train()
                try:
                    self.hooked_sess.close()
                except Exception:
                    logger.exception("Closing the session failed")

    def _resized(self, at) -> int:
        """Go on where a resize in place put the loop (a ``LoopPosition`` of the current epoch or a later
        one); returns the step of the epoch to run next."""
        if at.epoch != self.epoch_num:
            logger.warning("The regroup's source was in epoch %d, this rank in %d", at.epoch, self.epoch_num)
        self.steps_per_epoch = at.steps_per_epoch
        self._epoch_steps_done = at.step
        return at.step

    def callbacks_regrouped(self) -> None:
        """Tell every callback that the job was resized in place."""
        if self._callbacks is not None:
            self._callbacks.regrouped()

    def global_step_value(self) -> int:
        """The global step as the graph's variable holds it (the Python counter follows it)."""
        return int(self.sess.run(get_global_step_var()))

    def set_global_step(self, value: int) -> None:
        """Set the Python counter of the global step (after its variable changed outside the train op)."""
        self._global_step = int(value)

    def _raise_if_input_failed(self) -> None:
        """An input whose producer failed closes its queue, which looks like exhausted input:
        raise the input's error instead."""
        for source in self.input_sources():
            source.raise_if_failed()

    def _note_failure(self, e: BaseException) -> None:
        where = f"epoch {self.epoch_num}, local_step {self.local_step}, global_step {self.global_step}"
        logger.error("Training failed at %s: %s: %s", where, type(e).__name__, e)
        e.add_note(f"towerpack: training failed at {where}")

    # ---- entry points ------------------------------------------------------------------------
    def train(
        self,
        callbacks=None,
        monitors=None,
        session_creator=None,
        session_init=None,
        steps_per_epoch=None,
        starting_epoch: int = 1,
        max_epoch: int = 9999999,
        *,
        exact_resume: bool = False,
        resume_from: ResumeRecord | None = None,
    ) -> None:
        """``setup_callbacks`` → ``initialize`` → ``main_loop``.

        Called without arguments on a trainer constructed with a TrainConfig (the older
        ``SimpleTrainer(config).train()`` style), it trains with that config.

        ``exact_resume``: track the data position of the input's DataFlow, so that checkpoints record
        it; ``resume_from`` (the record of the checkpoint ``session_init`` restores) continues its
        epoch where it stopped instead of at ``starting_epoch``.
        """
        legacy = callbacks is None and monitors is None and steps_per_epoch is None
        if legacy and self.config is not None and "setup_callbacks" not in self._called:
            self.train_with_config(self.config)
            return
        if steps_per_epoch is None:
            raise ValueError("train() needs steps_per_epoch")
        if resume_from is not None and not exact_resume:
            raise ValueError("resume_from= continues a tracked data position: it needs exact_resume=True")
        if exact_resume:  # its callback (tag mode) comes after the input sources' ones
            self.position_keeper = PositionKeeper.for_trainer(self)
            keeper_callback = self.position_keeper.callback()
            if keeper_callback is not None:
                self.register_callback(keeper_callback)
        self.setup_callbacks(list(callbacks or []), list(monitors or []))
        start_step = 0
        if exact_resume:
            starting_epoch, start_step = self._start_position_tracking(
                resume_from, steps_per_epoch, starting_epoch
            )
        self.initialize(session_creator or NewSessionCreator(), session_init)
        self.main_loop(steps_per_epoch, starting_epoch, max_epoch, start_step)

    def train_with_defaults(
        self,
        *,
        callbacks=None,
        monitors=None,
        session_creator=None,
        session_init=None,
        steps_per_epoch=None,
        starting_epoch: int = 1,
        max_epoch: int = 9999999,
        extra_callbacks=None,
        exact_resume: bool = False,
        resume_from: ResumeRecord | None = None,
    ) -> None:
        """``train`` with the default callbacks and monitors filled in where not given."""
        callbacks = list(callbacks or [])
        extra_callbacks = DEFAULT_CALLBACKS() if extra_callbacks is None else list(extra_callbacks)
        monitors = DEFAULT_MONITORS() if monitors is None else list(monitors)
        if steps_per_epoch is None:
            raise ValueError("train_with_defaults() needs steps_per_epoch")
        self.train(
            callbacks + extra_callbacks,
            monitors,
            session_creator,
            session_init,
            steps_per_epoch,
            starting_epoch,
            max_epoch,
            exact_resume=exact_resume,
            resume_from=resume_from,
        )

    def train_with_config(self, config: TrainConfig) -> None:
        """Build the config's model with this trainer and train it (``launch_train_with_config``).

        Sets the log directory if the config names one (chief only), builds the graph from the
        config (a SingleCostTrainer turns the dataflow into an InputSource with
        ``apply_default_prefetch`` and calls ``setup_graph(...)`` with the model), then calls
        ``train_with_defaults(...)`` with the rest of the config.
        """
        if not isinstance(config, TrainConfig):
            raise TypeError(f"train_with_config takes a TrainConfig, got {type(config).__name__}")
        if config.logdir is not None and self.is_chief and logger.get_logger_dir() != config.logdir:
            logger.set_logger_dir(config.logdir, action=config.logdir_action)
        self._setup_graph_from_config(config)
        _warn_unused_regularization()
        session_creator = config.session_creator
        if session_creator is None:
            session_creator = NewSessionCreator(config=config.session_config)
        self.train_with_defaults(
            callbacks=config.callbacks,
            extra_callbacks=config.extra_callbacks,
            monitors=config.monitors,
            session_creator=session_creator,
            session_init=config.session_init,
            steps_per_epoch=config.steps_per_epoch,
            starting_epoch=config.starting_epoch,
            max_epoch=config.max_epoch,
            exact_resume=config.exact_resume,
            resume_from=config.resume_record,
        )

    def _setup_graph_from_config(self, config) -> None:
        """What ``launch_train_with_config`` does with the config's model and input: this base
        trainer builds its own graph, so it takes neither."""
        if config.model is not None or config.data is not None or config.dataflow is not None:
            raise ValueError(
                f"{type(self).__name__} builds its own graph; leave model, dataflow and data out "
                "of its TrainConfig (a SingleCostTrainer such as SimpleTrainer trains a model)"
            )

    # ---- predictors (tower trainers build them) ------------------------------------------------
    def get_predictor(self, input_names, output_names, device: int = 0):
        raise NotImplementedError(f"{type(self).__name__} cannot build predictors; use a TowerTrainer")


def _warn_unused_regularization() -> None:
    losses = tfv1.get_collection(tfv1.GraphKeys.REGULARIZATION_LOSSES)
    # get_variable(regularizer=...) collects lazily evaluated tensors that are built anew where they
    # are used: whether the cost uses them cannot be told from the graph.
    if not losses or not all(hasattr(t, "consumers") for t in losses):
        return
    consumers = {op for t in losses for op in t.consumers()}
    if not consumers:
        logger.warning(
            "%d regularization loss(es) are in REGULARIZATION_LOSSES but the cost does not use them; "
            "add tf.compat.v1.losses.get_regularization_loss() to the cost",
            len(losses),
        )
