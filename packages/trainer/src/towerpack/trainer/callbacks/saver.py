"""Checkpoints: ModelSaver, and MinSaver / MaxSaver that keep the best one."""

from __future__ import annotations

import os
import shutil
import time

from .. import logger
from ..callback import Callback
from ..compat import tfv1
from ..resume_state import RECORD_SUFFIX

__all__ = ["MaxSaver", "MinSaver", "ModelSaver", "write_checkpoint_pointer"]

CHECKPOINT_POINTER = "checkpoint"


def write_checkpoint_pointer(checkpoint_dir: str, latest: str, all_paths: list[str]) -> None:
    """Point ``<dir>/checkpoint`` at ``latest`` atomically (write a temporary file, fsync, rename).

    The paths are written relative to the directory, so it can be moved or copied.
    """
    relative = [os.path.relpath(p, checkpoint_dir) for p in all_paths]
    # An absolute directory: TF would make relative paths relative to a relative directory again.
    state = tfv1.train.generate_checkpoint_state_proto(
        os.path.abspath(checkpoint_dir),
        os.path.relpath(latest, checkpoint_dir),
        all_model_checkpoint_paths=relative,
    )
    target = os.path.join(checkpoint_dir, CHECKPOINT_POINTER)
    tmp = f"{target}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(str(state))  # a protobuf's str() is its text format
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)


def _checkpoint_files(prefix: str) -> list[str]:
    directory, base = os.path.split(prefix)
    return [
        os.path.join(directory, f)
        for f in os.listdir(directory or ".")
        if f in (base + ".index", base + ".meta", base + RECORD_SUFFIX) or f.startswith(base + ".data-")
    ]


class ModelSaver(Callback):
    """Saves a checkpoint ``model-<global_step>`` at every trigger (by default every epoch).

    The index and data files are written before ``<dir>/checkpoint`` is updated to point at
    them, and the pointer file is replaced atomically, so a process crash (even SIGKILL) or a
    failed write (a full disk) in the middle of a save leaves the pointer on the previous,
    complete checkpoint. With ``exact_resume`` the position record ``<prefix>.position.json``
    (``towerpack.trainer.resume_state``) is written with the checkpoint, also before the pointer
    moves. The checkpoint files are not fsynced (that would stall training for
    the whole write-back of a large model), so after an operating-system crash or power loss
    the pointer may name a checkpoint whose data never reached the disk. Older checkpoints are
    deleted only after the pointer moved. Disk errors are logged, not raised. The pointer holds
    paths relative to the directory, so the directory can be moved or copied.

    Args:
        max_to_keep: how many recent checkpoints to keep.
        keep_checkpoint_every_n_hours: additionally keep one checkpoint per this many hours.
        checkpoint_dir: defaults to the log directory.
        var_collections: collections of the variables to save.
    """

    def __init__(
        self,
        max_to_keep: int = 10,
        keep_checkpoint_every_n_hours: float = 0.5,
        checkpoint_dir: str | None = None,
        var_collections=(tfv1.GraphKeys.GLOBAL_VARIABLES,),
    ):
        self._max_to_keep = max_to_keep
        self._keep_every = keep_checkpoint_every_n_hours
        self._var_collections = (
            [var_collections] if isinstance(var_collections, str) else list(var_collections)
        )
        # Constructible without a directory (non-chief processes); it only fails when used.
        self.checkpoint_dir = os.fspath(checkpoint_dir) if checkpoint_dir is not None else None

    def _setup_graph(self):
        if self.checkpoint_dir is None:
            self.checkpoint_dir = logger.get_logger_dir()
        if self.checkpoint_dir is None:
            raise ValueError("ModelSaver needs checkpoint_dir= or a log directory (set_logger_dir)")
        os.makedirs(self.checkpoint_dir, exist_ok=True)
        variables = []
        for key in self._var_collections:
            variables.extend(v for v in tfv1.get_collection(key) if v not in variables)
        self.saver = tfv1.train.Saver(
            var_list=variables,
            max_to_keep=None,
            write_version=tfv1.train.SaverDef.V2,
            save_relative_paths=True,
        )
        tfv1.add_to_collection(tfv1.GraphKeys.SAVERS, self.saver)
        self.path = os.path.join(self.checkpoint_dir, "model")
        state = tfv1.train.get_checkpoint_state(self.checkpoint_dir)
        paths = state.all_model_checkpoint_paths if state else []
        full = (os.path.join(self.checkpoint_dir, os.path.basename(p)) for p in paths)
        self._kept = [p for p in full if _checkpoint_files(p)]
        self._last_keep_time = time.time()

    def _before_train(self):
        name = f"graph-{time.strftime('%m%d-%H%M%S')}.meta"
        try:
            tfv1.train.export_meta_graph(
                os.path.join(self.checkpoint_dir, name), graph=self.graph, saver_def=self.saver.saver_def
            )
        except OSError:
            logger.exception("Could not write the graph to %s", self.checkpoint_dir)

    def _trigger(self):
        self.save()

    @property
    def latest(self) -> str | None:
        """The prefix of the newest checkpoint in the directory (``.../model-<step>``), or None."""
        return self._kept[-1] if self._kept else None

    def save(self) -> str | None:
        """Save now; returns the checkpoint prefix, or None if the save failed."""
        step = self.trainer.global_step
        try:
            prefix = self.saver.save(
                self.trainer.sess, self.path, global_step=step, write_meta_graph=False, write_state=False
            )
            prefix = os.path.join(self.checkpoint_dir, os.path.basename(prefix))
            if not os.path.isfile(prefix + ".index"):
                raise OSError(f"checkpoint {prefix} has no index file after saving")
            record = self.trainer.resume_record()
            if record is not None:
                record.write(prefix)
            elif os.path.exists(prefix + RECORD_SUFFIX):  # an earlier run's, at the same step
                os.remove(prefix + RECORD_SUFFIX)
            kept = [p for p in self._kept if p != prefix] + [prefix]
            to_delete = []
            while len(kept) > self._max_to_keep:
                old = kept.pop(0)
                if self._keep_every and time.time() - self._last_keep_time > self._keep_every * 3600:
                    self._last_keep_time = time.time()
                    continue
                to_delete.append(old)
            write_checkpoint_pointer(self.checkpoint_dir, prefix, kept)
            self._kept = kept
        except (OSError, tfv1.errors.OpError):
            logger.exception(
                "Saving a checkpoint at global_step %d failed; the previous one stays current", step
            )
            return None
        for old in to_delete:
            for f in _checkpoint_files(old):
                try:
                    os.remove(f)
                except OSError:
                    logger.warning("Could not delete old checkpoint file %s", f)
        logger.info("Model saved to %s", prefix)
        return prefix


class MinSaver(Callback):
    """Copies the latest checkpoint to ``min-<stat>`` whenever the monitored ``stat`` reaches a new
    minimum (``reverse=True``: maximum, see ``MaxSaver``).

    Register it after a ModelSaver that triggers at the same times.
    """

    def __init__(
        self,
        monitor_stat: str,
        reverse: bool = False,
        filename: str | None = None,
        checkpoint_dir: str | None = None,
    ):
        self.monitor_stat = monitor_stat
        self.reverse = reverse
        self.filename = filename or ("max-" if reverse else "min-") + monitor_stat.replace("/", "_")
        self.checkpoint_dir = checkpoint_dir
        self.best = None

    def _setup_graph(self):
        if self.checkpoint_dir is None:
            self.checkpoint_dir = logger.get_logger_dir()
        if self.checkpoint_dir is None:
            raise ValueError(f"{type(self).__name__} needs checkpoint_dir= or a log directory")

    def _better(self, value: float) -> bool:
        if self.best is None:
            return True
        return value > self.best if self.reverse else value < self.best

    def _trigger(self):
        try:
            value = self.trainer.monitors.get_latest(self.monitor_stat)
        except KeyError:
            logger.warning("%s: no value of %s yet", type(self).__name__, self.monitor_stat)
            return
        if not self._better(value):
            return
        latest = tfv1.train.latest_checkpoint(self.checkpoint_dir)
        if latest is None:
            logger.warning(
                "%s: no checkpoint found in %s; is a ModelSaver registered?",
                type(self).__name__,
                self.checkpoint_dir,
            )
            return
        self.best = value
        target = os.path.join(self.checkpoint_dir, self.filename)
        for src in _checkpoint_files(latest):
            suffix = os.path.basename(src)[len(os.path.basename(latest)) :]
            tmp = f"{target}{suffix}.tmp"
            shutil.copyfile(src, tmp)
            os.replace(tmp, target + suffix)
        logger.info(
            "%s: %s=%.6g, checkpoint copied to %s", type(self).__name__, self.monitor_stat, value, target
        )


class MaxSaver(MinSaver):
    """Copies the latest checkpoint to ``max-<stat>`` whenever ``stat`` reaches a new maximum."""

    def __init__(self, monitor_stat: str, filename: str | None = None, checkpoint_dir: str | None = None):
        super().__init__(monitor_stat, reverse=True, filename=filename, checkpoint_dir=checkpoint_dir)
