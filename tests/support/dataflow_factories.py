"""Dataflow factories that the dataflow tests serve with the real ``dataflow serve`` command."""

from __future__ import annotations

import numpy as np

from towerpack.dataflow import DataFromGenerator, FakeData


def counting():
    """Datapoints ``[array(i), "dp-i"]`` for i = 0, 1, 2, ... (one long epoch)."""
    return DataFromGenerator(lambda: ([np.array(i, dtype="int64"), f"dp-{i}"] for i in range(10**9)))


def small():
    return FakeData([[16, 16], [4]], size=100, random=False, dtype=["uint8", "int32"])


def not_a_dataflow():
    return [1, 2, 3]
