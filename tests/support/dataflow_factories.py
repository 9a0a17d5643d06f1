"""Dataflow factories that the dataflow tests serve with the real ``dataflow serve`` command."""

from __future__ import annotations

import numpy as np

from towerpack.dataflow import DataFromGenerator, DataFromList, FakeData


def counting():
    """Datapoints ``[array(i), "dp-i"]`` for i = 0, 1, 2, ... (one long epoch)."""
    return DataFromGenerator(lambda: ([np.array(i, dtype="int64"), f"dp-{i}"] for i in range(10**9)))


def small():
    return FakeData([[16, 16], [4]], size=100, random=False, dtype=["uint8", "int32"])


def not_a_dataflow():
    return [1, 2, 3]


def dataset():
    """The dataset file named by DATAFLOW_TEST_DATASET (written by the test), sharded and shuffled."""
    import os

    from towerpack.dataflow import LMDBSerializer

    return LMDBSerializer.load(
        os.environ["DATAFLOW_TEST_DATASET"], shuffle=True, remainder="uneven", block_size=8
    )


def shuffled_ids():
    """``[id]`` for 90 ids, shuffled each epoch and split among the server's workers by ShardData."""
    from towerpack.dataflow import ShardData

    return ShardData(DataFromList([[np.int64(i)] for i in range(90)], shuffle=True), remainder="uneven")
