"""A dataflow benchmark (TestDataSpeed) slow enough to show its progress bar for a few seconds.

Usage: slow_bench.py SIZE SECONDS_PER_DATAPOINT.
"""

import sys
import time

from towerpack.dataflow import DataFromList, MapData
from towerpack.dataflow.pipeline.speed import TestDataSpeed

size, pause = int(sys.argv[1]), float(sys.argv[2])


def slow(dp):
    time.sleep(pause)
    return dp


TestDataSpeed(MapData(DataFromList(list(range(size)), shuffle=False), slow), size=size).start()
