"""Items that carry their ids and data epoch, for the exact-resume tests: the dataset, and the factory
`dataflow serve serve_items:make_df` serves (run from this folder)."""

import numpy as np

from towerpack.dataflow import BatchData
from towerpack.dataflow.dataset.base import ArrayDataset

N_ITEMS, BATCH = 240, 4


class Items(ArrayDataset):
    """Items 0..N_ITEMS-1 in a shuffled (seed, epoch) order; a datapoint is ``[id, data epoch]``."""

    _columns = ("ids",)

    def __init__(self, **order):
        self.ids = np.arange(N_ITEMS, dtype=np.int64)
        self._init_order(True, training=True, seed=7, remainder="uneven", **order)

    def _get(self, index):
        return [self.ids[index], np.int64(self._epoch)]


def make_df():
    """What a data server serves: batches of BATCH items."""
    return BatchData(Items(), BATCH)
