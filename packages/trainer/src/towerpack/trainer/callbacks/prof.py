"""Profiling and resources: throughput, run traces, GPU and host memory.

(GPU utilization, which needs NVML, is in ``gpu_utilization.py``.)
"""

from __future__ import annotations

import os
import time

import psutil

from .. import logger
from ..callback import Callback
from ..compat import tf, tfv1

__all__ = ["GPUMemoryTracker", "GraphProfiler", "HostMemoryTracker", "PeakMemoryTracker", "ThroughputTracker"]


class ThroughputTracker(Callback):
    """Put the epoch's throughput into the monitors at the end of every epoch.

    Time is measured from ``before_epoch`` to ``after_epoch``, so the epoch-end callbacks
    (evaluation, checkpoints) do not count; steps are hooked session runs. Scalars:
    ``Throughput (steps/sec)`` and, with ``samples_per_step``, ``Throughput (samples/sec)``.
    Runs on every process.
    """

    _chief_only = False

    def __init__(self, samples_per_step: int | None = None):
        if samples_per_step is not None and samples_per_step <= 0:
            raise ValueError(f"samples_per_step must be positive, got {samples_per_step}")
        self._samples_per_step = samples_per_step
        self.steps_per_sec: float | None = None

    def _before_epoch(self) -> None:
        self._start_step = self.global_step
        self._start = time.perf_counter()

    def _after_epoch(self) -> None:
        elapsed = time.perf_counter() - self._start
        steps = self.global_step - self._start_step
        self._elapsed, self._steps = elapsed, steps

    def _trigger_epoch(self) -> None:
        if self._steps <= 0 or self._elapsed <= 0:
            return
        self.steps_per_sec = self._steps / self._elapsed
        monitors = self.trainer.monitors
        monitors.put_scalar("Throughput (steps/sec)", self.steps_per_sec)
        if self._samples_per_step is not None:
            monitors.put_scalar("Throughput (samples/sec)", self.steps_per_sec * self._samples_per_step)


class GraphProfiler(Callback):
    """Trace every hooked run (``FULL_TRACE``) and write what happened into the log directory:
    ``chrome-trace-<global step>.json`` (``dump_tracing``, for chrome://tracing or Perfetto),
    ``runmetadata-<global step>.pb`` (``dump_metadata``, a serialized ``RunMetadata``) and/or a
    TensorBoard event tagged ``trace-<global step>`` (``dump_event``).

    Tracing every step is slow: wrap it, e.g. ``PeriodicCallback(GraphProfiler(), every_k_steps=500)``
    or ``EnableCallbackIf(GraphProfiler(), lambda self: self.epoch_num == 2)``.
    """

    def __init__(self, dump_metadata: bool = False, dump_tracing: bool = True, dump_event: bool = False):
        self._dir = logger.require_logger_dir("GraphProfiler")
        self._dump_metadata = dump_metadata
        self._dump_tracing = dump_tracing
        self._dump_event = dump_event
        options = tfv1.RunOptions(trace_level=tfv1.RunOptions.FULL_TRACE)
        self._args = tfv1.train.SessionRunArgs(fetches=None, options=options)

    def before_run(self, ctx):
        return self._args

    def after_run(self, run_context, run_values) -> None:
        metadata = run_values.run_metadata
        step = self.global_step
        if self._dump_metadata:
            with open(os.path.join(self._dir, f"runmetadata-{step}.pb"), "wb") as f:
                f.write(metadata.SerializeToString())
        if self._dump_tracing:
            from tensorflow.python.client import timeline

            trace = timeline.Timeline(step_stats=metadata.step_stats).generate_chrome_trace_format()
            with open(os.path.join(self._dir, f"chrome-trace-{step}.json"), "w", encoding="utf-8") as f:
                f.write(trace)
        if self._dump_event:
            event = tfv1.Event()
            event.tagged_run_metadata.tag = f"trace-{step}"
            event.tagged_run_metadata.run_metadata = metadata.SerializeToString()
            self.trainer.monitors.put_event(event)


class GPUMemoryTracker(Callback):
    """After every epoch, report the peak GPU memory TensorFlow's allocator has had in use, as
    ``PeakMemory(MB)/gpu:<i>`` (bytes / 1e6) for each GPU index in ``devices``.

    Without a visible GPU it logs a warning once and reports nothing. Runs on every process.
    """

    _chief_only = False

    def __init__(self, devices=(0,)):
        devices = [devices] if isinstance(devices, int) else list(devices)
        if not devices or not all(isinstance(d, int) and d >= 0 for d in devices):
            raise ValueError(f"devices must be GPU indices, got {devices!r}")
        self._devices = devices
        self._enabled = True

    def _setup_graph(self) -> None:
        visible = len(tf.config.list_physical_devices("GPU"))
        missing = [d for d in self._devices if d >= visible]
        if missing:
            what = "no GPU is visible" if visible == 0 else f"only {visible} GPU(s) are visible"
            logger.warning("GPUMemoryTracker: %s (asked for GPU %s); it reports nothing", what, missing)
            self._enabled = False

    def _trigger_epoch(self) -> None:
        if not self._enabled:
            return
        for d in self._devices:
            peak = tf.config.experimental.get_memory_info(f"GPU:{d}")["peak"]
            self.trainer.monitors.put_scalar(f"PeakMemory(MB)/gpu:{d}", peak / 1e6)


PeakMemoryTracker = GPUMemoryTracker


def _free_ram_gb() -> float:
    return psutil.virtual_memory().available / 1024**3


class HostMemoryTracker(Callback):
    """The host's free (available) RAM: logged when the graph is set up and before training,
    reported as ``HostFreeMemory (GB)`` at every trigger (by default, after every epoch).
    Runs on every process."""

    _chief_only = False

    def _setup_graph(self) -> None:
        logger.info("Free RAM while setting up the graph: %.2f GB", _free_ram_gb())

    def _before_train(self) -> None:
        logger.info("Free RAM before training: %.2f GB", _free_ram_gb())

    def _trigger(self) -> None:
        self.trainer.monitors.put_scalar("HostFreeMemory (GB)", _free_ram_gb())
