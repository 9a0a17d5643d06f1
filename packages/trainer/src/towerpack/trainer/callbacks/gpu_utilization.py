"""GPUUtilizationTracker: the mean utilization of each GPU during every epoch, read through NVML.

NVML comes from nvidia-ml-py (the ``pynvml`` module NVIDIA maintains). A thread samples the
GPUs once a second while an epoch runs; NVML calls are short C calls, so the thread costs the
training loop nothing measurable and, unlike a sampling process, is safe under any launcher.
"""

from __future__ import annotations

import os
import threading

from .. import logger
from ..callback import Callback
from ..stop_training import StopTraining

__all__ = ["GPUUtilizationTracker"]


class _Sampler(threading.Thread):
    """Appends one list of utilizations (percent, one per device) per interval while sampling."""

    def __init__(self, nvml, handles, interval: float):
        super().__init__(name="GPUUtilizationTracker", daemon=True)
        self._nvml = nvml
        self._handles = handles
        self._interval = interval
        self._sampling = threading.Event()
        self._stop = threading.Event()
        self.samples: list[list[float]] = []
        self.error: BaseException | None = None

    def begin(self) -> None:
        self.samples = []
        self._sampling.set()

    def end(self) -> list[list[float]]:
        self._sampling.clear()
        samples, self.samples = self.samples, []
        return samples

    def stop(self) -> None:
        self._stop.set()
        self._sampling.set()  # wake it up

    def run(self) -> None:
        try:
            while not self._stop.is_set():
                self._sampling.wait()
                if self._stop.is_set():
                    return
                rates = [float(self._nvml.nvmlDeviceGetUtilizationRates(h).gpu) for h in self._handles]
                if self._sampling.is_set():
                    self.samples.append(rates)
                self._stop.wait(self._interval)
        except Exception as e:
            self.error = e


def _default_devices(trainer) -> list:
    """CUDA_VISIBLE_DEVICES (ids or UUIDs), else the Horovod local rank's GPU, else all (None)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        if visible.strip() in ("", "-1"):
            return []  # every GPU hidden
        return [int(d) if d.strip().isdigit() else d.strip() for d in visible.split(",")]
    if trainer.hvd is not None:
        return [trainer.hvd.local_rank()]
    return None


class GPUUtilizationTracker(Callback):
    """After every epoch, report the mean utilization (percent) of each GPU during the epoch as
    ``GPUUtil/<device>``.

    ``devices`` are NVML device indices (or UUIDs); by default the GPUs of
    ``CUDA_VISIBLE_DEVICES``, else the local rank's GPU under Horovod, else all GPUs. The GPUs
    are sampled once a second while the epoch runs; the last sample of an epoch is dropped (it
    may come from after the epoch's end). Where NVML cannot be used (no NVIDIA driver, no GPU),
    it logs why once and reports nothing; if sampling fails during training, training stops
    (``StopTraining``) with the error in the log. Runs on every process.
    """

    _chief_only = False
    #: Seconds between two samples.
    INTERVAL_S = 1.0

    def __init__(self, devices=None):
        self._devices = None if devices is None else list(devices)
        self._sampler: _Sampler | None = None
        self._nvml = None
        self._epoch_samples: list = []

    def _setup_graph(self) -> None:
        devices = self._devices if self._devices is not None else _default_devices(self.trainer)
        if devices == []:
            self._disable("CUDA_VISIBLE_DEVICES hides every GPU")
            return
        try:
            import pynvml
        except ImportError:
            self._disable("the NVML binding is not installed (pip install nvidia-ml-py)")
            return
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as e:
            self._disable(f"NVML does not start ({e}): this machine has no NVIDIA driver, or no GPU")
            return
        self._nvml = pynvml
        try:
            if devices is None:
                devices = list(range(pynvml.nvmlDeviceGetCount()))
            handles = [
                pynvml.nvmlDeviceGetHandleByIndex(d)
                if isinstance(d, int)
                else pynvml.nvmlDeviceGetHandleByUUID(d)
                for d in devices
            ]
        except pynvml.NVMLError as e:
            self._disable(f"NVML cannot open GPU(s) {devices} ({e})")
            return
        if not handles:
            self._disable("NVML lists no GPU")
            return
        self._devices = devices
        self._sampler = _Sampler(pynvml, handles, self.INTERVAL_S)

    def _disable(self, reason: str) -> None:
        logger.warning("GPUUtilizationTracker is off (it reports nothing): %s", reason)
        if self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._nvml = None

    def _before_train(self) -> None:
        if self._sampler is not None:
            self._sampler.start()

    def _before_epoch(self) -> None:
        if self._sampler is not None:
            self._sampler.begin()

    def _after_epoch(self) -> None:
        if self._sampler is not None:
            self._epoch_samples = self._sampler.end()

    def _trigger_epoch(self) -> None:
        if self._sampler is None:
            return
        if self._sampler.error is not None:
            logger.error("GPUUtilizationTracker: sampling the GPUs failed: %r", self._sampler.error)
            raise StopTraining(f"GPUUtilizationTracker failed: {self._sampler.error!r}")
        samples = self._epoch_samples[:-1] if len(self._epoch_samples) > 1 else self._epoch_samples
        if not samples:
            return
        for i, device in enumerate(self._devices):
            mean = sum(s[i] for s in samples) / len(samples)
            self.trainer.monitors.put_scalar(f"GPUUtil/{device}", mean)

    def _after_train(self) -> None:
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler.join(5.0)
            self._sampler = None
        if self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._nvml = None
