"""TrainConfig: everything a training run needs, in one object; AutoResumeTrainConfig resumes."""

from __future__ import annotations

import os

from towerpack.dataflow.pipeline.base import dataflow_len
from towerpack.utils.resize_files import JOIN_VAR

from . import logger
from .callback import Callback
from .callbacks.graph import RunUpdateOps
from .callbacks.input_wait import InputWaitTracker
from .callbacks.monitor import JSONWriter, MonitorBase, ScalarPrinter, TFEventWriter
from .callbacks.preemption import PreemptionSaver
from .callbacks.saver import CHECKPOINT_POINTER
from .callbacks.steps import ProgressBar
from .callbacks.summary import MergeAllSummaries, MovingAverageSummary
from .compat import tfv1
from .input_source.base import InputSource
from .model_desc import ModelDescBase
from .resume_state import RECORD_SUFFIX, ResumeRecord
from .sessinit import SaverRestore, SessionInit, SmartInit

__all__ = ["DEFAULT_CALLBACKS", "DEFAULT_MONITORS", "AutoResumeTrainConfig", "TrainConfig"]


def DEFAULT_CALLBACKS() -> list[Callback]:
    """Callbacks every training gets unless ``extra_callbacks`` says otherwise (the reference's four,
    ``PreemptionSaver``, which checkpoints and stops on SIGTERM, SIGUSR1, ..., and
    ``InputWaitTracker``, which reports whether the input limits the step rate)."""
    return [
        PreemptionSaver(),
        MovingAverageSummary(),
        ProgressBar(),
        MergeAllSummaries(),
        RunUpdateOps(),
        InputWaitTracker(),
    ]


def DEFAULT_MONITORS() -> list[MonitorBase]:
    """Monitors every training gets unless ``monitors`` says otherwise (file writers need a log dir)."""
    return [TFEventWriter(), JSONWriter(), ScalarPrinter()]


def _is_dataflow(obj) -> bool:
    return all(hasattr(obj, a) for a in ("__iter__", "reset_state"))


class TrainConfig:
    """The configuration of one training run.

    Args:
        dataflow: a DataFlow to train on (turned into an InputSource by the trainer), or
        data: an InputSource. Give at most one of the two.
        model: the ModelDesc.
        callbacks: callbacks to run. extra_callbacks: more callbacks, defaulting to
            ``DEFAULT_CALLBACKS()``; the callbacks used are ``callbacks + extra_callbacks``.
        monitors: defaults to ``DEFAULT_MONITORS()``.
        session_creator: a ``tf.compat.v1.train.SessionCreator``, or
        session_config: a ``ConfigProto`` for the default session creator (not both).
        session_init: a SessionInit (or anything ``SmartInit`` takes: checkpoint path, dict).
        starting_epoch: the number of the first epoch (1-based). max_epoch: the last epoch, inclusive.
        steps_per_epoch: defaults to the size of the dataflow / input source. With several
            towers or processes, divide it yourself: each step consumes one batch per tower.
        nr_tower, tower, predict_tower: the older way to name the towers (GPU ids); a
            multi-device trainer constructed with the config (``SyncMultiGPUTrainerReplicated(config)``)
            uses ``tower``. Newer scripts give the devices to the trainer instead.
        logdir, logdir_action: if set, the log directory is set with ``set_logger_dir`` when
            training starts (on the chief only).
        exact_resume: track where the data of the epoch stands (the DataFlow the trainer reads must
            support it, see ``towerpack.dataflow.resume.position``); every checkpoint then records it, and
            ``AutoResumeTrainConfig`` continues an epoch where it stopped, each datapoint once.
    """

    def __init__(
        self,
        dataflow=None,
        data=None,
        model=None,
        callbacks=None,
        extra_callbacks=None,
        monitors=None,
        session_creator=None,
        session_config=None,
        session_init=None,
        starting_epoch: int = 1,
        steps_per_epoch: int | None = None,
        max_epoch: int = 99999,
        nr_tower: int = 1,
        tower=None,
        predict_tower=None,
        logdir=None,
        logdir_action: logger.DirAction | str = logger.DirAction.KEEP,
        exact_resume: bool = False,
        **kwargs,
    ):
        if kwargs:
            raise TypeError(f"TrainConfig got unknown argument(s): {', '.join(sorted(kwargs))}")
        if dataflow is not None and data is not None:
            raise ValueError("TrainConfig takes dataflow= or data=, not both")
        if dataflow is not None and (isinstance(dataflow, InputSource) or not _is_dataflow(dataflow)):
            raise TypeError(f"dataflow= must be a DataFlow, got {type(dataflow).__name__}")
        if data is not None and not isinstance(data, InputSource):
            raise TypeError(
                f"data= must be an InputSource, got {type(data).__name__}"
                + (" (pass a DataFlow as dataflow=)" if _is_dataflow(data) else "")
            )
        if model is not None and not isinstance(model, ModelDescBase):
            raise TypeError(f"model= must be a ModelDesc, got {type(model).__name__}")
        self.dataflow, self.data, self.model = dataflow, data, model

        self.callbacks = _callback_list("callbacks", callbacks or [])
        self.extra_callbacks = (
            DEFAULT_CALLBACKS()
            if extra_callbacks is None
            else _callback_list("extra_callbacks", extra_callbacks)
        )
        self.monitors = DEFAULT_MONITORS() if monitors is None else _callback_list("monitors", monitors)
        for m in self.monitors:
            if not isinstance(m, MonitorBase):
                raise TypeError(f"monitors= takes monitors; {m} is not one")

        if session_creator is not None and session_config is not None:
            raise ValueError("TrainConfig takes session_creator= or session_config=, not both")
        if session_creator is not None and not isinstance(session_creator, tfv1.train.SessionCreator):
            raise TypeError(
                f"session_creator= must be a SessionCreator, got {type(session_creator).__name__}"
            )
        if session_config is not None and not isinstance(session_config, tfv1.ConfigProto):
            raise TypeError(
                f"session_config= must be a tf.compat.v1.ConfigProto, got {type(session_config).__name__}"
            )
        self.session_creator = session_creator
        self.session_config = session_config
        self.session_init = SmartInit(session_init)
        if not isinstance(self.session_init, SessionInit):
            raise TypeError(f"session_init= must be a SessionInit, got {session_init!r}")

        self.starting_epoch = int(starting_epoch)
        self.max_epoch = int(max_epoch)
        self._check_epochs()
        if steps_per_epoch is None:
            steps_per_epoch = self._size()
        steps_per_epoch = int(steps_per_epoch)
        if steps_per_epoch < 0:
            raise ValueError(f"steps_per_epoch must be >= 0, got {steps_per_epoch}")
        self.steps_per_epoch = steps_per_epoch

        self.tower = list(range(nr_tower)) if tower is None else list(tower)
        self.nr_tower = len(self.tower)
        self.predict_tower = [0] if predict_tower is None else list(predict_tower)
        self.logdir = os.fspath(logdir) if logdir is not None else None
        self.logdir_action = logdir_action
        if not isinstance(exact_resume, bool):
            raise TypeError(f"exact_resume= must be True or False, got {exact_resume!r}")
        self.exact_resume = exact_resume
        #: The record of the checkpoint being resumed (``AutoResumeTrainConfig`` with ``exact_resume``).
        self.resume_record: ResumeRecord | None = None

    def _check_epochs(self) -> None:
        if self.starting_epoch < 1 or self.max_epoch < self.starting_epoch - 1:
            raise ValueError(f"bad epochs: starting_epoch={self.starting_epoch}, max_epoch={self.max_epoch}")

    def _size(self) -> int:
        if self.dataflow is not None:
            size = dataflow_len(self.dataflow)
            if size is None:
                raise ValueError(
                    f"steps_per_epoch is required: the dataflow {type(self.dataflow).__name__} has no length"
                )
            return size
        if self.data is not None:
            try:
                return self.data.size()
            except NotImplementedError as e:
                raise ValueError(f"steps_per_epoch is required: the input's size is unknown ({e})") from e
        raise ValueError("steps_per_epoch is required when there is no dataflow or data")


def _callback_list(name: str, items) -> list:
    if not isinstance(items, (list, tuple)):
        raise TypeError(f"{name}= must be a list, got {type(items).__name__}")
    for cb in items:
        if not isinstance(cb, Callback):
            raise TypeError(f"{name}= takes Callbacks; {cb!r} is not one")
    return list(items)


class AutoResumeTrainConfig(TrainConfig):
    """A TrainConfig that continues from the log directory if an earlier run left a checkpoint there.

    It restores the latest checkpoint (weights, optimizer state, global step). With
    ``exact_resume=True`` and a checkpoint that recorded its position (saved with ``exact_resume``),
    training continues exactly there: the epoch of the checkpoint at the step it had reached, with
    the data of that epoch not yet trained on (also with another number of ranks or data workers).
    Otherwise it starts at the epoch after the last one that had finished when that checkpoint was
    saved, as recorded in ``stats.json``: a checkpoint saved in the middle of an epoch resumes at
    that epoch, which runs again in full from the checkpoint's weights.

    With ``always_resume=False`` what the caller gives wins: with a ``session_init`` nothing is
    resumed; with a ``starting_epoch`` the checkpoint is restored and that epoch is kept.
    The directory is ``logdir=`` if given, else the one set with ``set_logger_dir``.
    """

    def __init__(self, always_resume: bool = True, **kwargs):
        super().__init__(**kwargs)
        self.resumed_from = None
        logdir = self.logdir or logger.get_logger_dir()
        if os.environ.get(JOIN_VAR) == "1":
            # A rank joining a running job in place: its variables and position come from the job.
            logger.info("AutoResumeTrainConfig: this rank joins a running job; it restores no checkpoint")
            return
        ckpt = _latest_checkpoint(logdir)
        if ckpt is None:
            return
        if not always_resume and kwargs.get("session_init") is not None:
            logger.info("AutoResumeTrainConfig: using the given session_init, not the checkpoint %s", ckpt)
            return
        if kwargs.get("session_init") is not None:
            logger.warning("AutoResumeTrainConfig: the checkpoint %s replaces the given session_init", ckpt)
        self.session_init = SaverRestore(ckpt)
        self.resumed_from = ckpt
        if not always_resume and "starting_epoch" in kwargs:
            logger.info("Resuming from %s at the given starting_epoch %d", ckpt, self.starting_epoch)
            return
        if self.exact_resume and self._resume_exactly(ckpt):
            return
        epoch = _last_finished_epoch(logdir, ckpt, self.steps_per_epoch)
        if epoch is None:
            logger.warning(
                "Resuming weights from %s, but %s has no record of its epoch", ckpt, JSONWriter.FILENAME
            )
            return
        self.starting_epoch = epoch + 1
        self._check_epochs()
        logger.info("Resuming from %s at epoch %d", ckpt, self.starting_epoch)

    def _resume_exactly(self, ckpt: str) -> bool:
        """Continue at the position ``ckpt`` recorded; False if it recorded none."""
        record = ResumeRecord.read(ckpt)
        if record is None:
            logger.warning(
                "Resuming from %s, which recorded no data position (saved without exact_resume): "
                "its epoch runs again from the start of its data",
                ckpt,
            )
            return False
        step = _checkpoint_global_step(ckpt)
        if step is not None and step != record.trainer.global_step:
            raise ValueError(
                f"{ckpt}{RECORD_SUFFIX} records global_step {record.trainer.global_step}, "
                f"but the checkpoint holds global_step {step}"
            )
        self.resume_record = record
        self.starting_epoch = record.trainer.epoch + (1 if record.trainer.epoch_finished else 0)
        self._check_epochs()
        logger.info(
            "Resuming from %s at epoch %d (step %d of %d had been done)",
            ckpt,
            record.trainer.epoch,
            record.trainer.step_in_epoch,
            record.trainer.steps_per_epoch,
        )
        return True


def _checkpoint_global_step(ckpt: str) -> int | None:
    try:
        return int(tfv1.train.load_variable(ckpt, "global_step"))
    except (tfv1.errors.OpError, ValueError):
        return None


def _latest_checkpoint(logdir: str | None) -> str | None:
    if logdir is None or not os.path.isdir(logdir):
        return None
    ckpt = tfv1.train.latest_checkpoint(logdir)
    if ckpt is None and os.path.exists(os.path.join(logdir, CHECKPOINT_POINTER)):
        logger.warning(
            "AutoResumeTrainConfig: %s names no existing checkpoint; starting from scratch",
            os.path.join(logdir, CHECKPOINT_POINTER),
        )
    return ckpt


def _last_finished_epoch(logdir: str, ckpt: str, steps_per_epoch: int) -> int | None:
    """The last epoch that had finished at the checkpoint's global step, from stats.json.

    Every epoch ends with a record at its last global step, after the records of its steps. An
    epoch followed by records of a later one thus ended at the global step of its last record.
    The file's last epoch may have been cut short by a crash; it counts as finished when it ran
    ``steps_per_epoch`` hooked runs (one per step, as the trainers do).
    """
    stats = JSONWriter.load_existing_json(logdir)
    records = [
        (int(s["epoch_num"]), int(s["global_step"]))
        for s in stats or []
        if "epoch_num" in s and "global_step" in s
    ]
    if not records:
        return None
    step = _checkpoint_global_step(ckpt)
    if step is None:
        return records[-1][0]  # no global step to place it: the last recorded epoch
    end_of = dict(records)  # epoch -> global step of its last record
    last = records[-1][0]
    previous_end = end_of.get(last - 1, 0 if last == 1 else None)
    if previous_end is not None and end_of[last] - previous_end < steps_per_epoch:
        del end_of[last]
    finished = [epoch for epoch, end in end_of.items() if end <= step]
    return max(finished) if finished else records[0][0] - 1
