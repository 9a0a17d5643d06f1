"""The dataflow the data server runs: endless shuffled, batched training digits (no TensorFlow).

Served with ``dataflow serve data:make_train_df`` (run from this folder, so ``data`` is importable).
Every consumer gets distinct batches, so the trainers need no sharding of their own. The split
is the one of examples/digits/train.py (same seed), so its validation images are never served.
"""

import numpy as np
from sklearn.datasets import load_digits

from towerpack.dataflow import BatchData, DataFromList, RepeatedData

NUM_VALIDATION = 297


def train_points(seed: int = 0):
    data = load_digits()
    images = (data.images / 16.0).astype(np.float32)[..., None]
    labels = data.target.astype(np.int32)
    order = np.random.RandomState(seed).permutation(len(labels))[NUM_VALIDATION:]
    return [[images[i], labels[i]] for i in order]


def make_train_df(batch_size: int = 32):
    return BatchData(RepeatedData(DataFromList(train_points(), shuffle=True), -1), batch_size)
