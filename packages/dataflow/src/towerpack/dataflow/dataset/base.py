"""IndexedDataset: the base of the dataset readers, whose items are addressed by index.

The block-wise :class:`~towerpack.dataflow.formats.reader.DatasetReader` reads runs of a sequential file;
these datasets are in memory or one file per item, so an epoch's order is a permutation of all
``n`` items, drawn from ``(seed, epoch)`` alone (the same in every process; about 20 ms for
ImageNet's 1.28M items). This process keeps its piece of that order by the project's sharding
contract (:class:`~towerpack.dataflow.pipeline.sharding.Shard`): the ranks and workers of a job together
deliver each item once per epoch (``remainder`` aside). In tracking mode
(:class:`~towerpack.dataflow.resume.tracker.PositionTracker`) the first epoch reads only what a
checkpoint's :class:`~towerpack.dataflow.resume.position.DataPosition` left of it (and in tag mode every
item carries its position).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from ..pipeline.base import DataFlow, _new_seed
from ..pipeline.sharding import Remainder, SelfSharding, Shard
from ..resume.keys import join, keys_of
from ..resume.source import PositionSource
from .files import Split

__all__ = ["DEFAULT_SEED", "ArrayDataset", "IndexedDataset", "LabelledImageFiles", "read_labelled_image"]

#: The seed of the epoch order when none is given: every process of a job must agree on it.
DEFAULT_SEED = 0


class IndexedDataset(PositionSource, SelfSharding, DataFlow):
    """Items ``0 .. n-1`` in a ``(seed, epoch)`` order, of which this process yields its shard.

    Subclasses take the keyword arguments below as ``**order``, pass them to :meth:`_init_order`
    from their ``__init__``, and implement :meth:`_count` and :meth:`_get`. ``reset_state`` is
    optional: iterating before it starts at epoch 1. A sharding instance has ``shards_itself``
    set, so :class:`~towerpack.dataflow.ShardData` refuses to split it a second time.

    As the reference's readers (``RNGDataFlow`` s) did, ``reset_state`` gives the instance a
    ``numpy.random.RandomState`` in ``self.rng``, seeded anew in each process, for subclasses that
    draw their own datapoints (pairs, triplets ...); the epoch order never uses it.

    Args (after each reader's own):
        shard: read only this process's shard (rank and worker); ``None`` shards the training
            split only, so a chief-only validation sees the whole test set.
        seed: the seed of the epoch orders (the same in every process of a job).
        remainder: how the ranks' shares are made equal: ``"pad"``, ``"drop"`` or ``"uneven"``.
        rank, world_size: override the rank and world size of this process's ``placement()``.
    """

    shuffle: bool
    rng: np.random.RandomState

    def _init_order(
        self,
        shuffle: bool,
        *,
        training: bool,
        shard: bool | None = None,
        seed: int = DEFAULT_SEED,
        remainder: Remainder | str = Remainder.PAD,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        self.shuffle = bool(shuffle)
        self.shards_itself = training if shard is None else bool(shard)
        self.seed = int(seed)
        self.remainder = Remainder.parse(remainder)
        self.rank, self.world_size = rank, world_size
        if self.shards_itself:
            Shard.current(rank, world_size)  # a bad placement or override fails here, not in a worker
        self._epoch = 0

    def _init_split_order(self, split: Split, shuffle: bool | None, **order: Any) -> None:
        """:meth:`_init_order` for a reader of ``split``: shuffled and sharded when it is the training
        split (``shuffle`` given overrides the first)."""
        training = split is Split.TRAIN
        self._init_order(training if shuffle is None else shuffle, training=training, **order)

    # -- for subclasses --------------------------------------------------------------------------

    def _count(self) -> int:
        """Items in the dataset (all processes together)."""
        raise NotImplementedError

    def _get(self, index: int) -> Any:
        """The datapoint of item ``index``."""
        raise NotImplementedError

    # -- the DataFlow ----------------------------------------------------------------------------

    def reset_state(self) -> None:
        self.rng = np.random.RandomState(_new_seed(self))
        self._epoch = self._first_epoch()

    def epoch_order(self, epoch: int) -> np.ndarray:
        """All ``n`` item indices in epoch ``epoch``'s order (from 1), the same in every process."""
        n = self._count()
        if not self.shuffle:
            return np.arange(n)
        return np.random.default_rng((self.seed, int(epoch))).permutation(n)

    def epoch_indices(self, epoch: int) -> np.ndarray:
        """The item indices this process yields in epoch ``epoch``, in order."""
        order = self.epoch_order(epoch)
        consumed = self._consumed(epoch)
        if not self.shards_itself and not consumed:
            return order
        runs = self._epoch_runs(len(order), consumed)
        if not runs:
            return order[:0]
        return np.concatenate([order[r.start : r.stop] for r in runs])

    def __iter__(self) -> Iterator[Any]:
        self._epoch += 1
        if self._tagging:  # items carry their positions (PositionTracker's tag mode)
            yield from self._iter_tagged(self._epoch)
            return
        indices = self.epoch_indices(self._epoch)
        self.items_read = len(indices)
        for i in indices.tolist():
            yield self._get(i)

    def _iter_tagged(self, epoch: int) -> Iterator[Any]:
        """The items of ``epoch`` this process reads, each with its key as ``_tag`` (the loop of
        :meth:`PositionSource._tag_pairs`, written out: it runs once per item)."""
        runs = self._epoch_runs(self._count(), self._consumed(epoch))
        positions = np.concatenate([np.arange(r.start, r.stop) for r in runs]) if runs else np.zeros(0, int)
        keys, indices = keys_of(epoch, positions).tolist(), self.epoch_order(epoch)[positions].tolist()
        pairs = zip(keys, indices, strict=True)
        get, pending = self._get, self._take_pending(epoch)
        if pending is not None:
            for key, index in pairs:  # the first item takes the keys passed over
                self.position_tag, pending = join(pending, key), None
                yield get(index)
                break
        for key, index in pairs:
            self.position_tag = key
            yield get(index)
        self._skipped = join(self._skipped, pending)  # an empty pass: the next item takes them


class ArrayDataset(IndexedDataset):
    """An :class:`IndexedDataset` whose items are rows of arrays held in memory.

    ``_columns`` names the attributes (the reference's names: ``images``/``labels``, ``X``/``Y``
    ...) whose row ``i`` makes datapoint ``i``.
    """

    _columns: tuple[str, ...]

    def _count(self) -> int:
        return len(getattr(self, self._columns[0]))

    def _get(self, index: int) -> list[Any]:
        return [getattr(self, name)[index] for name in self._columns]


class LabelledImageFiles(IndexedDataset):
    """An :class:`IndexedDataset` of image files: item ``i`` is ``imglist[i] = (path, label)``, read
    as ``[BGR uint8 image, label]``; ``class_names[label]`` names each label."""

    imglist: list[tuple[str, int]]
    class_names: list[str]

    def get_label_names(self) -> list[str]:
        """The name of each class, in label order."""
        return list(self.class_names)

    def _count(self) -> int:
        return len(self.imglist)

    def _get(self, index: int) -> list[Any]:
        return read_labelled_image(*self.imglist[index])


def read_labelled_image(path: str, label: int) -> list[Any]:
    """``[BGR uint8 image of the file at path, label]``; a file that does not decode is named."""
    from ..image.decode import read_image  # OpenCV loads when images are read, not when datasets import

    return [read_image(path), label]
