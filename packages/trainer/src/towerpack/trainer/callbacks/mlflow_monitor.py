"""MLflowMonitor: log a training run (parameters, scalars, images) to MLflow.

Experiment tracking as users expect it today, in place of the reference's CometMLMonitor (whose
service is SaaS-only): by default everything stays on the machine, in the log directory.
Install with ``pip install 'towerpack-trainer[mlflow]'``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import time

import numpy as np

from .. import logger
from ..stop_training import StopTraining
from .monitor import MonitorBase

__all__ = ["MLflowMonitor"]

#: Where the default store lives, inside the log directory.
DB_FILE = "mlflow.db"
ARTIFACT_DIR = "mlartifacts"
_BAD_NAME_CHARS = re.compile(r"[^/\w.\- :]")
_MAX_BATCH = 1000  # MLflow's limit of metrics per log_batch


def _metric_key(name: str) -> str:
    """A name MLflow accepts: characters it refuses become '_', no empty or absolute path parts."""
    key = _BAD_NAME_CHARS.sub("_", name)
    parts = [p for p in key.split("/") if p not in ("", ".", "..")]
    return "/".join(parts) or "_"


class MLflowMonitor(MonitorBase):
    """Log the run to MLflow: ``params`` and ``tags`` at the start, every scalar as a metric at
    its global step, ``epoch_num`` after every epoch, images with their step, and the run's end
    (``FINISHED``, ``FAILED`` when training raised, ``KILLED`` on Ctrl-C).

    Where it logs: ``tracking_uri`` if given; else, when a log directory is set, the
    ``MLFLOW_TRACKING_URI`` environment variable or, without it, a local store in the log
    directory (``mlflow.db``, a SQLite file, with artifacts in ``mlartifacts/``: see it with
    ``mlflow ui --backend-store-uri sqlite:///<logdir>/mlflow.db``). Without either it logs
    nothing, as the file monitors do on processes without a log directory, so one run is logged
    per job, by the chief. (MLflow 3 refuses the older ``./mlruns`` file store unless
    ``MLFLOW_ALLOW_FILE_STORE=true``; pass ``tracking_uri='file:...'`` with that set to use it.)

    Metric names are MLflow keys: characters MLflow refuses (such as parentheses) become ``_``.
    Scalars are sent in batches, after every epoch and at least every ``flush_secs`` seconds.
    ``run_id`` continues an existing run instead of starting a new one.
    """

    def __init__(
        self,
        experiment_name: str = "towerpack",
        run_name: str | None = None,
        tracking_uri: str | None = None,
        params: dict | None = None,
        tags: dict | None = None,
        run_id: str | None = None,
        flush_secs: float = 30.0,
    ):
        if importlib.util.find_spec("mlflow") is None:
            raise ImportError("MLflowMonitor needs mlflow: pip install 'towerpack-trainer[mlflow]'")
        self.experiment_name = experiment_name
        self.run_name = run_name
        self.tracking_uri = tracking_uri
        self.params = dict(params or {})
        self.tags = dict(tags or {})
        self.run_id = run_id
        self._flush_secs = flush_secs
        self._client = None
        self._pending: list = []
        self._last_flush = time.monotonic()

    def _store(self) -> tuple[str | None, str | None]:
        """``(tracking URI, artifact location for a new experiment)``, or ``(None, None)``."""
        if self.tracking_uri is not None:
            return self.tracking_uri, None
        logdir = logger.get_logger_dir()
        if logdir is None:
            return None, None
        if os.environ.get("MLFLOW_TRACKING_URI"):
            return os.environ["MLFLOW_TRACKING_URI"], None
        logdir = os.path.abspath(logdir)
        return f"sqlite:///{os.path.join(logdir, DB_FILE)}", os.path.join(logdir, ARTIFACT_DIR)

    def _before_train(self) -> None:
        uri, artifacts = self._store()
        if uri is None:
            logger.warning("No log directory set and no tracking_uri: MLflowMonitor logs nothing")
            return
        from mlflow.tracking import MlflowClient

        self._client = MlflowClient(tracking_uri=uri)
        if self.run_id is None:
            experiment = self._client.get_experiment_by_name(self.experiment_name)
            if experiment is None:
                experiment_id = self._client.create_experiment(
                    self.experiment_name, artifact_location=artifacts
                )
            else:
                experiment_id = experiment.experiment_id
            run = self._client.create_run(experiment_id, run_name=self.run_name, tags=self.tags)
            self.run_id = run.info.run_id
            self._log_params()
        else:
            for key, value in self.tags.items():
                self._client.set_tag(self.run_id, key, value)
        logger.info("MLflowMonitor: logging run %s to %s", self.run_id, uri)

    def _log_params(self) -> None:
        from mlflow.entities import Param

        t = self.trainer
        loop = {
            "steps_per_epoch": t.steps_per_epoch,
            "starting_epoch": t.starting_epoch,
            "max_epoch": t.max_epoch,
        }
        params = {**loop, **self.params}
        items = [Param(_metric_key(str(k)), str(v)) for k, v in params.items()]
        for i in range(0, len(items), 100):  # MLflow's limit of params per batch
            self._client.log_batch(self.run_id, params=items[i : i + 100])

    def process_scalar(self, name, value):
        if self._client is None:
            return
        from mlflow.entities import Metric

        step = int(self.trainer.global_step)
        self._pending.append(Metric(_metric_key(name), float(value), int(time.time() * 1000), step))
        if len(self._pending) >= _MAX_BATCH or time.monotonic() - self._last_flush > self._flush_secs:
            self._flush()

    def process_image(self, name, images):
        if self._client is None:
            return
        step = int(self.trainer.global_step)
        for i, image in enumerate(np.asarray(images)):
            if image.shape[-1] == 1:
                image = image[:, :, 0]
            key = _metric_key(name if i == 0 else f"{name}_{i}")
            self._client.log_image(self.run_id, image, key=key, step=step)

    def _trigger_epoch(self):
        if self._client is None:
            return
        self.process_scalar("epoch_num", self.trainer.epoch_num)
        self._flush()

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        self._last_flush = time.monotonic()
        for i in range(0, len(pending), _MAX_BATCH):
            self._client.log_batch(self.run_id, metrics=pending[i : i + _MAX_BATCH])

    def _after_train(self):
        if self._client is None:
            return
        error = sys.exc_info()[1]  # the exception ending training, if any
        if error is None or isinstance(error, StopTraining):
            status = "FINISHED"
        elif isinstance(error, KeyboardInterrupt):
            status = "KILLED"
        else:
            status = "FAILED"
        try:
            self._flush()
        finally:
            self._client.set_terminated(self.run_id, status=status)
            self._client = None
