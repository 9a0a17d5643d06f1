"""The TF_CONFIG cluster of a ``tf.train.Server`` job, and the server of this task."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from .compat import tf, tfv1

__all__ = ["ClusterTask", "create_server", "read_tf_config"]


@dataclass(frozen=True)
class ClusterTask:
    """This process's place in the cluster: ``spec`` is ``{"worker": [...], "ps": [...]}``."""

    spec: dict
    job: str
    index: int

    @property
    def num_workers(self) -> int:
        return len(self.spec.get("worker", []))

    @property
    def num_ps(self) -> int:
        return len(self.spec.get("ps", []))

    @property
    def is_chief(self) -> bool:
        return self.job == "worker" and self.index == 0

    @property
    def device(self) -> str:
        return f"/job:{self.job}/task:{self.index}"


def read_tf_config(value: str | None = None) -> ClusterTask:
    """Parse TF_CONFIG (``launch --backend tf-server --ps K`` sets it); errors name what is wrong."""
    value = os.environ.get("TF_CONFIG") if value is None else value
    if not value:
        raise RuntimeError(
            "TF_CONFIG is not set: start the job with `launch --backend tf-server --np N --ps K script.py` "
            "(or set TF_CONFIG to a cluster spec and this task's type and index)"
        )
    try:
        cfg = json.loads(value)
        spec, task = cfg["cluster"], cfg["task"]
        job, index = str(task["type"]), int(task["index"])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(
            f"TF_CONFIG must be JSON with 'cluster' and 'task': {{type, index}}; got {value!r}"
        ) from e
    if not spec.get("worker"):
        raise ValueError(f"TF_CONFIG names no worker tasks: {value!r}")
    if job not in spec or not 0 <= index < len(spec[job]):
        raise ValueError(f"TF_CONFIG task {job}:{index} is not in its cluster {sorted(spec)}")
    return ClusterTask({k: list(v) for k, v in spec.items()}, job, index)


def create_server(task: ClusterTask | None = None, config: tfv1.ConfigProto | None = None):
    """Start the ``tf.train.Server`` of this task (the port is the one TF_CONFIG names)."""
    task = task or read_tf_config()
    return tfv1.train.Server(
        tf.train.ClusterSpec(task.spec), job_name=task.job, task_index=task.index, config=config, start=True
    )
