"""Ledger: the items a job has trained on, as it grows step by step, and the position it makes.

A byte per item of every epoch in flight (so a million-item dataset takes a megabyte per epoch
begun and not finished); an epoch whose items are all done is dropped. Keys are those of
:mod:`towerpack.dataflow.resume.tags`.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .keys import split_keys
from .position import DataPosition
from .ranges import Ranges, ranges_of_mask

__all__ = ["Ledger"]


def _bits_of(ranges: Ranges, size: int) -> np.ndarray:
    bits = np.zeros(size, bool)
    for a, b in ranges:
        bits[a:b] = True
    return bits


class Ledger:
    """The items a job has trained on (or passed over), a byte per item of every epoch in flight.

    Starts at ``start`` (what the resumed checkpoint recorded; None: epoch 1 from its start) and
    grows with :meth:`add`; :meth:`position` is the :class:`DataPosition` a checkpoint records. The
    dataset's size may be given later (:meth:`set_size`), before the first key is added.
    """

    def __init__(self, start: DataPosition | None = None, size: int | None = None) -> None:
        self.start = start
        self.size = start.size if start is not None else size
        self._first = start.epoch if start is not None else 1
        self._bits: dict[int, np.ndarray] = {}
        self._added: dict[int, int] = {}

    @property
    def first(self) -> int:
        """The first epoch not complete (all before it are done)."""
        return self._first

    def finish_before(self, epoch: int) -> None:
        """Count every epoch before ``epoch`` as done."""
        for e in [e for e in self._bits if e < epoch]:
            del self._bits[e], self._added[e]
        self._first = max(self._first, int(epoch))

    def set_size(self, size: int) -> None:
        if self.size is not None and self.size != size:
            raise ValueError(
                f"the data position is of a dataset of {self.size} items, but it has {size} items"
            )
        self.size = int(size)

    def _epoch_bits(self, epoch: int) -> np.ndarray:
        bits = self._bits.get(epoch)
        if bits is None:
            done = self.start.consumed_in(epoch) if self.start is not None else ()
            bits = self._bits[epoch] = _bits_of(done, self.size)
            self._added[epoch] = int(bits.sum())
        return bits

    def add(self, keys: Iterable[int] | np.ndarray) -> None:
        """Mark the items of ``keys`` done."""
        keys = np.asarray(keys, dtype=np.int64).ravel()
        if not len(keys):
            return
        if self.size is None:
            raise RuntimeError("Ledger.add(): the dataset's size is not known yet")
        epochs, positions = split_keys(keys)
        if int(positions.max()) >= self.size or int(positions.min()) < 0:
            raise ValueError(
                f"a tag holds position {int(positions.max())}, outside the dataset of {self.size} items"
            )
        lo, hi = int(epochs.min()), int(epochs.max())
        for epoch in range(max(lo, self._first), hi + 1):
            mine = positions if lo == hi else positions[epochs == epoch]
            if not len(mine):
                continue
            self._epoch_bits(epoch)[mine] = True
            self._added[epoch] += len(mine)
            if self._added[epoch] >= self.size:  # maybe complete: count exactly (duplicates happen)
                self._added[epoch] = int(self._bits[epoch].sum())
        while self._added.get(self._first, -1) == self.size and self.size:
            del self._bits[self._first], self._added[self._first]
            self._first += 1

    def position(self) -> DataPosition:
        """Where the job stands: the first epoch not complete, what is done of it and of later ones."""
        size = self.size if self.size is not None else 0
        epochs: dict[int, Ranges] = {}
        if self.start is not None:  # epochs begun before the start and not added to since
            for e in [self.start.epoch, *(e for e, _ in self.start.later)]:
                if e >= self._first:
                    epochs[e] = self.start.consumed_in(e)
        epochs.update({e: ranges_of_mask(b) for e, b in self._bits.items() if e >= self._first})
        return DataPosition.of_epochs(size, epochs, self._first)
