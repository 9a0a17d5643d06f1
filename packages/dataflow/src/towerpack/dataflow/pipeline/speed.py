"""Measure how fast a dataflow produces datapoints (and bytes)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import DataFlow
from .progress import progress_bar
from .stream import repeat_forever

__all__ = ["SpeedReport", "TestDataSpeed", "benchmark"]


def datapoint_nbytes(dp: Any) -> int:
    """Bytes held in the arrays (and bytes/str) of a datapoint."""
    if isinstance(dp, np.ndarray):
        return dp.nbytes
    if isinstance(dp, (bytes, bytearray, str)):
        return len(dp)
    if isinstance(dp, dict):
        return sum(datapoint_nbytes(v) for v in dp.values())
    if isinstance(dp, (list, tuple)):
        return sum(datapoint_nbytes(v) for v in dp)
    return 0


@dataclass
class SpeedReport:
    datapoints: int
    seconds: float
    nbytes: int

    @property
    def datapoints_per_s(self) -> float:
        return self.datapoints / self.seconds if self.seconds > 0 else float("inf")

    @property
    def mb_per_s(self) -> float:
        return self.nbytes / 1e6 / self.seconds if self.seconds > 0 else float("inf")

    def __str__(self) -> str:
        return (
            f"{self.datapoints} datapoints in {self.seconds:.2f} s: "
            f"{self.datapoints_per_s:.1f} datapoints/s, "
            f"{self.mb_per_s:.1f} MB/s"
        )


def benchmark(
    df: DataFlow, size: int = 1000, warmup: int = 0, reset: bool = True, progress: bool = True
) -> SpeedReport:
    """Take ``warmup`` then ``size`` datapoints from ``df`` (across epochs) and time the latter.

    ``reset`` calls ``df.reset_state()`` first. A tqdm bar shows progress unless ``progress`` is false
    (in a log, a line every ``$TOWERPACK_PROGRESS_INTERVAL`` seconds: see ``progress.progress_bar``).
    """
    if reset:
        df.reset_state()

    it = repeat_forever(df)
    for _ in range(warmup):
        next(it)
    nbytes = 0
    start = time.perf_counter()
    with progress_bar(
        total=size, unit="dp", disable=not progress, smoothing=0.1, dynamic_ncols=True, label="bench"
    ) as bar:
        for _ in range(size):
            nbytes += datapoint_nbytes(next(it))
            bar.update(1)
    elapsed = time.perf_counter() - start
    it.close()
    return SpeedReport(size, elapsed, nbytes)


class TestDataSpeed:
    """Reference-style wrapper: ``TestDataSpeed(df, size=5000).start()`` prints and returns a report."""

    __test__ = False  # not a pytest test class

    def __init__(self, ds: DataFlow, size: int = 5000, warmup: int = 0) -> None:
        self.ds = ds
        self.size = size
        self.warmup = warmup

    def start(self) -> SpeedReport:
        report = benchmark(self.ds, self.size, self.warmup)
        print(report, flush=True)
        return report
