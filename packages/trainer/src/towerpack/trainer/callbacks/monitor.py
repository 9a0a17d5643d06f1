"""Monitors: where scalars, summaries and events reported during training end up.

``trainer.monitors`` (a ``Monitors``) receives ``put_scalar`` / ``put_summary`` / ``put_image``
/ ``put_event`` from callbacks and dispatches them to every monitor. Monitors that write files
(``TFEventWriter``, ``JSONWriter``) become ``NoOpMonitor`` when no log directory is set, which is
how non-chief processes avoid writing: they write nothing when no log directory is set.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import time
from collections import defaultdict

import numpy as np

from .. import logger
from ..callback import Callback
from ..compat import tfv1
from ..tower import strip_tower_prefix

__all__ = [
    "JSONWriter",
    "MonitorBase",
    "Monitors",
    "NoOpMonitor",
    "ScalarHistory",
    "ScalarPrinter",
    "SendMonitorData",
    "TFEventWriter",
]


class MonitorBase(Callback):
    """Base class of monitors; they are callbacks too, and run on every process."""

    _chief_only = False

    def process_summary(self, summary) -> None:
        """A ``tf.compat.v1.Summary`` protobuf."""

    def process_scalar(self, name: str, value: float) -> None:
        pass

    def process_image(self, name: str, images: np.ndarray) -> None:
        """Images as uint8 ``NHWC``."""

    def process_event(self, event) -> None:
        """A ``tf.compat.v1.Event`` protobuf."""


class NoOpMonitor(MonitorBase):
    """A monitor that ignores everything (what file-writing monitors become without a log dir)."""

    def __init__(self, name: str | None = None):
        self._name = name

    def __str__(self):
        return f"NoOpMonitor({self._name})" if self._name else "NoOpMonitor"


_SUMMARY_SUFFIX = "-summary"


def _clean_tag(tag: str) -> str:
    tag = strip_tower_prefix(tag)
    return tag[: -len(_SUMMARY_SUFFIX)] if tag.endswith(_SUMMARY_SUFFIX) else tag


def _scalar_summary(name: str, value: float):
    return tfv1.Summary(value=[tfv1.Summary.Value(tag=name, simple_value=float(value))])


class ScalarHistory(MonitorBase):
    """Keeps every scalar as ``(global_step, value)`` in memory; ``Monitors`` always has one."""

    def __init__(self):
        self._history = defaultdict(list)

    def process_scalar(self, name, value):
        self._history[name].append((self.trainer.global_step, float(value)))

    def get_latest(self, name: str) -> float:
        if not self._history.get(name):
            raise KeyError(f"no scalar named {name!r} was reported (known: {sorted(self._history)})")
        return self._history[name][-1][1]

    def get_history(self, name: str) -> list[tuple[int, float]]:
        if name not in self._history:
            raise KeyError(f"no scalar named {name!r} was reported (known: {sorted(self._history)})")
        return list(self._history[name])

    def names(self) -> list[str]:
        return sorted(self._history)


class Monitors(Callback):
    """Dispatches what callbacks report to every monitor; the trainer's ``monitors`` attribute.

    Scalar tags are cleaned: a ``towerN/`` prefix and a ``-summary`` suffix are removed.
    """

    _chief_only = False

    def __init__(self, monitors: list[MonitorBase]):
        self._scalar_history = ScalarHistory()
        self._monitors = [*monitors, self._scalar_history]
        for m in self._monitors:
            if not isinstance(m, MonitorBase):
                raise TypeError(f"{m!r} is not a monitor")

    def _setup_graph(self):
        # The history is not registered as a callback of its own.
        self._scalar_history.setup_graph(self.trainer)

    def _dispatch(self, fn) -> None:
        for m in self._monitors:
            fn(m)

    def put_summary(self, summary) -> None:
        """A Summary protobuf or its serialized bytes (what a summary op evaluates to)."""
        if isinstance(summary, bytes):
            summary = tfv1.Summary.FromString(summary)
        if not isinstance(summary, tfv1.Summary):
            raise TypeError(f"put_summary takes a tf.compat.v1.Summary, got {type(summary).__name__}")
        for value in summary.value:
            if value.WhichOneof("value") == "simple_value":
                name, val = _clean_tag(value.tag), value.simple_value
                value.tag = name
                self._dispatch(lambda m, n=name, v=val: m.process_scalar(n, v))
        self._dispatch(lambda m: m.process_summary(summary))

    def put_scalar(self, name: str, value) -> None:
        """A number; numpy scalars and 0-d arrays are accepted."""
        value = float(np.asarray(value).item())
        name = _clean_tag(name)
        self._dispatch(lambda m: m.process_scalar(name, value))
        summary = _scalar_summary(name, value)
        self._dispatch(lambda m: m.process_summary(summary))

    def put_image(self, name: str, images) -> None:
        """An ``HW``, ``HWC`` or ``NHWC`` image array (uint8, or floats in [0, 255])."""
        arr = np.asarray(images)
        if arr.ndim == 2:
            arr = arr[np.newaxis, :, :, np.newaxis]
        elif arr.ndim == 3:
            arr = arr[np.newaxis]
        if arr.ndim != 4:
            raise ValueError(f"put_image takes HW, HWC or NHWC arrays, got shape {np.shape(images)}")
        arr = np.clip(arr, 0, 255).astype(np.uint8)
        self._dispatch(lambda m: m.process_image(name, arr))

    def put_event(self, event) -> None:
        """A ``tf.compat.v1.Event``; its step and wall time are filled in."""
        event.step = self.trainer.global_step
        event.wall_time = time.time()
        self._dispatch(lambda m: m.process_event(event))

    def get_latest(self, name: str) -> float:
        """The last value reported for a scalar (on this process)."""
        return self._scalar_history.get_latest(name)

    def get_history(self, name: str) -> list[tuple[int, float]]:
        """Every ``(global_step, value)`` reported for a scalar (on this process)."""
        return self._scalar_history.get_history(name)


def _log_dir(logdir):
    return logdir if logdir is not None else logger.get_logger_dir()


class TFEventWriter(MonitorBase):
    """Writes TensorBoard event files (summaries, scalars, images, the graph) into the log dir.

    The directory is ``logdir`` or, when training starts, the one set with ``set_logger_dir``;
    without either the writer does nothing (this is how non-chief processes stay quiet).
    """

    def __init__(self, logdir=None, max_queue: int = 10, flush_secs: int = 120, split_files: bool = False):
        self._logdir = logdir
        self._max_queue = max_queue
        self._flush_secs = flush_secs
        self._split_files = split_files
        self._writer = None

    def _setup_graph(self):
        self._logdir = _log_dir(self._logdir)
        if self._logdir is None:
            logger.warning("No log directory set: TFEventWriter writes nothing")
            return
        self._writer = tfv1.summary.FileWriter(
            self._logdir, graph=None, max_queue=self._max_queue, flush_secs=self._flush_secs
        )

    def _before_train(self):
        if self._writer is not None:
            self._writer.add_graph(self.graph)

    def process_summary(self, summary):
        if self._writer is not None:
            self._writer.add_summary(summary, self.trainer.global_step)

    def process_image(self, name, images):
        if self._writer is None:
            return
        values = []
        for i, img in enumerate(images):
            image = tfv1.Summary.Image(
                height=img.shape[0],
                width=img.shape[1],
                colorspace=img.shape[2],
                encoded_image_string=_encode_png(img),
            )
            values.append(tfv1.Summary.Value(tag=f"{name}/{i}", image=image))
        self._writer.add_summary(tfv1.Summary(value=values), self.trainer.global_step)

    def process_event(self, event):
        if self._writer is not None:
            self._writer.add_event(event)

    def _trigger(self):
        if self._writer is None:
            return
        self._writer.flush()
        if self._split_files:
            self._writer.close()
            self._writer.reopen()

    def _after_train(self):
        if self._writer is not None:
            self._writer.close()


def _encode_png(img: np.ndarray) -> bytes:
    import zlib

    h, w, c = img.shape
    color_type = {1: 0, 2: 4, 3: 2, 4: 6}[c]
    raw = b"".join(b"\x00" + img[row].tobytes() for row in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = w.to_bytes(4, "big") + h.to_bytes(4, "big") + bytes([8, color_type, 0, 0, 0])
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


class JSONWriter(MonitorBase):
    """Writes every scalar to ``<logdir>/stats.json``: a list of records, each with the scalars of
    one step plus ``epoch_num`` and ``global_step``.

    The file is rewritten atomically after each record. On a resumed run it keeps the records of
    the epochs before ``starting_epoch`` and drops later ones (they are being re-run), except those
    of an epoch resumed in its middle up to the resumed global step; the full old file is kept as
    ``stats.json.<time>`` whenever something is dropped.
    """

    FILENAME = "stats.json"

    def __init__(self, logdir=None):
        self._logdir = logdir
        self._fname = None
        self._stats: list[dict] = []
        self._stat_now: dict = {}

    def _setup_graph(self):
        self._logdir = _log_dir(self._logdir)
        if self._logdir is None:
            logger.warning("No log directory set: JSONWriter writes nothing")
            return
        self._fname = os.path.join(self._logdir, self.FILENAME)

    @staticmethod
    def load_existing_json(dirname: str | None = None) -> list[dict] | None:
        """The records of ``stats.json`` in a directory (default: the log dir), or None."""
        dirname = dirname or logger.get_logger_dir()
        if dirname is None:
            return None
        fname = os.path.join(dirname, JSONWriter.FILENAME)
        if not os.path.isfile(fname):
            return None
        with open(fname, encoding="utf-8") as f:
            stats = json.load(f)
        if not isinstance(stats, list):
            raise ValueError(f"{fname} is not a list of records")
        return stats

    @staticmethod
    def load_existing_epoch_number(dirname: str | None = None) -> int | None:
        """The last ``epoch_num`` recorded in ``stats.json``, or None."""
        stats = JSONWriter.load_existing_json(dirname)
        try:
            return int(stats[-1]["epoch_num"])
        except (TypeError, IndexError, KeyError, ValueError):
            return None

    def _before_train(self):
        if self._fname is None:
            return
        stats = self.load_existing_json(self._logdir)
        starting_epoch = self.trainer.starting_epoch
        if stats:
            keep = [s for s in stats if self._kept_at_resume(s)]
            if len(keep) == len(stats):
                logger.info("Appending to the existing %s", self._fname)
            else:
                backup = f"{self._fname}.{time.strftime('%m%d-%H%M%S')}"
                shutil.copyfile(self._fname, backup)
                logger.warning(
                    "%s has records of epochs >= starting_epoch=%d; they are dropped (old file kept as %s)",
                    self._fname,
                    starting_epoch,
                    backup,
                )
            self._stats = keep
            self._write()
        self._trigger()

    def _kept_at_resume(self, record: dict) -> bool:
        epoch, trainer = record.get("epoch_num", 0), self.trainer
        if epoch < trainer.starting_epoch:
            return True
        # An epoch resumed in its middle keeps the records of its steps before the checkpoint.
        return (
            epoch == trainer.starting_epoch
            and trainer.starting_step > 0
            and record.get("global_step", math.inf) <= trainer.global_step
        )

    def process_scalar(self, name, value):
        if self._fname is not None:
            self._stat_now[name] = float(value)

    def _uses_trigger_step(self) -> bool:
        return self._fname is not None

    def _trigger_step(self):
        # Scalars of the epoch's last step are written together with the end-of-epoch ones.
        if self.trainer.local_step != self.trainer.steps_per_epoch - 1:
            self._push()

    def _trigger_epoch(self):
        # Every epoch gets a record, even without scalars: resuming relies on it.
        self._push(always=True)

    def _push(self, always: bool = False):
        if self._fname is None or (not self._stat_now and not always):
            return
        self._stat_now["epoch_num"] = self.trainer.epoch_num
        self._stat_now["global_step"] = self.trainer.global_step
        self._stats.append(self._stat_now)
        self._stat_now = {}
        self._write()

    def _write(self):
        tmp = self._fname + ".tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(self._stats, f)
            os.replace(tmp, self._fname)
        except OSError:
            logger.exception("Could not write %s", self._fname)


class ScalarPrinter(MonitorBase):
    """Logs the scalars: at the end of each epoch (``enable_epoch``) and/or of each step (``enable_step``).

    ``whitelist`` / ``blacklist`` are regular expressions matched against the full name.
    """

    def __init__(self, enable_step: bool = False, enable_epoch: bool = True, whitelist=None, blacklist=None):
        self._enable_step = enable_step
        self._enable_epoch = enable_epoch
        self._whitelist = [re.compile(p) for p in whitelist] if whitelist is not None else None
        self._blacklist = [re.compile(p) for p in (blacklist or [])]
        self._dict: dict[str, float] = {}

    def _wanted(self, name: str) -> bool:
        if self._whitelist is not None and not any(p.fullmatch(name) for p in self._whitelist):
            return False
        return not any(p.fullmatch(name) for p in self._blacklist)

    def process_scalar(self, name, value):
        if self._wanted(name):
            self._dict[name] = float(value)

    def _print(self):
        for name, value in sorted(self._dict.items()):
            logger.info("%s: %.6g", name, value)
        self._dict = {}

    def _uses_trigger_step(self) -> bool:
        return self._enable_step

    def _trigger_step(self):
        if self._enable_step and self.trainer.local_step != self.trainer.steps_per_epoch - 1:
            self._print()

    def _trigger_epoch(self):
        if self._enable_epoch or self._enable_step:
            self._print()


class SendMonitorData(MonitorBase):
    """Run a shell command with the values of some scalars as soon as all of them have been
    reported (checked after every step and every trigger), then wait for all of them again.

    ``command`` is formatted with ``{name}`` fields for the ``names`` (one name or a list), e.g.
    ``SendMonitorData('curl -s "http://.../?err={val-error}"', ['val-error'])``. A failing
    command (non-zero exit) is logged. Runs on every process, like all monitors.
    """

    def __init__(self, command: str, names):
        self.command = command
        self.names = [names] if isinstance(names, str) else list(names)
        self._values: dict[str, float] = {}

    def process_scalar(self, name, value):
        if name in self.names:
            self._values[name] = float(value)

    def _trigger_step(self):
        self._send_when_complete()

    def _trigger(self):
        self._send_when_complete()

    def _send_when_complete(self):
        if any(name not in self._values for name in self.names):
            return
        cmd = self.command.format(**self._values)
        self._values = {}
        result = subprocess.run(cmd, shell=True, check=False)
        if result.returncode != 0:
            logger.error("Command %r failed with exit code %d", cmd, result.returncode)
