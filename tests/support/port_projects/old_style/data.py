import numpy as np
from tensorpack import *


class Bands(RNGDataFlow):
    """8x8 images with a bright band of rows at the label's place (4 classes)."""

    def __init__(self, size, seed):
        self._size = size
        self.rng = np.random.RandomState(seed)

    def size(self):
        return self._size

    def get_data(self):
        for _ in range(self._size):
            label = self.rng.randint(4)
            img = self.rng.uniform(0, 0.3, (8, 8)).astype(np.float)
            img[label * 2:label * 2 + 2] += 0.7
            yield [img.astype(np.float32), np.int(label)]


class Twice(ProxyDataFlow):
    """Each datapoint of ``ds`` twice."""

    def get_data(self):
        for dp in self.ds.get_data():
            yield dp
            yield dp

    def size(self):
        return 2 * self.ds.size()
