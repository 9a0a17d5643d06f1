"""BatchData and BatchDataByShape: stack consecutive datapoints into batches."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..resume.keys import join, join_all
from ..resume.protocol import Batch, Step
from .base import DataFlow, ProxyDataFlow

__all__ = ["BatchData", "BatchDataByShape", "aggregate_batch"]


def _stack(values: list[Any], where: str) -> np.ndarray:
    first = values[0]
    if isinstance(first, np.ndarray):
        shape = first.shape
        for i, v in enumerate(values):
            vshape = np.shape(v)
            if vshape != shape:
                raise ValueError(
                    f"BatchData: cannot stack {where}: datapoint 0 has shape {shape} but "
                    f"datapoint {i} has shape {vshape} (ragged shapes need use_list=True)"
                )
        return np.stack(values)
    try:
        arr = np.asarray(values)
    except ValueError as e:  # numpy refuses ragged nested sequences
        raise ValueError(f"BatchData: cannot stack {where}: {e} (ragged shapes need use_list=True)") from None
    if arr.dtype == object:
        raise ValueError(
            f"BatchData: cannot stack {where}: values of type {type(first).__name__} "
            "give an object array (use use_list=True)"
        )
    return arr


def aggregate_batch(dps: list[Any], use_list: bool = False) -> Any:
    """Stack the components of ``dps`` (lists, tuples or dicts of one structure) into one batch."""

    def component(values: list[Any], where: str) -> Any:
        return list(values) if use_list else _stack(values, where)

    first = dps[0]
    if isinstance(first, dict):
        return {k: component([dp[k] for dp in dps], f"key {k!r}") for k in first}
    if not isinstance(first, (list, tuple)):
        raise TypeError(f"BatchData: a datapoint must be a list, tuple or dict, got {type(first).__name__}")
    n = len(first)
    for dp in dps:
        if len(dp) != n:
            raise ValueError(
                f"BatchData: datapoints have different numbers of components ({n} and {len(dp)})"
            )
    return [component([dp[i] for dp in dps], f"component {i}") for i in range(n)]


class BatchData(ProxyDataFlow):
    """Group ``batch_size`` consecutive datapoints and stack each component along a new first axis.

    Args:
        ds: a dataflow of lists, tuples or dicts with the same structure every time.
        batch_size: datapoints per batch.
        remainder: also yield the last, smaller batch of an epoch.
        use_list: keep components as Python lists instead of stacking them (for ragged data).
    """

    #: Tag mode (see :mod:`towerpack.dataflow.resume.tags`): as :class:`~towerpack.dataflow.MapData`'s.
    _skipped: Any = None

    def __init__(
        self, ds: DataFlow, batch_size: int, remainder: bool = False, use_list: bool = False
    ) -> None:
        super().__init__(ds)
        if int(batch_size) <= 0:
            raise ValueError(f"BatchData: batch_size must be positive, got {batch_size}")
        self.batch_size = int(batch_size)
        self.remainder = remainder
        self.use_list = use_list

    def resume_step(self) -> Step:
        return Step(inputs=(self.ds,), batch=Batch(self.batch_size, bool(self.remainder)))

    def __len__(self) -> int:
        n = len(self.ds)
        full, rest = divmod(n, self.batch_size)
        return full + int(self.remainder and rest > 0)

    def __iter__(self) -> Iterator[Any]:
        if self._track.tags:
            yield from self._iter_tagged()
            return
        holder: list[Any] = []
        for dp in self.ds:
            holder.append(dp)
            if len(holder) == self.batch_size:
                yield self._aggregate(holder)
                holder = []
        if self.remainder and holder:
            yield self._aggregate(holder)

    def _iter_tagged(self) -> Iterator[Any]:
        """As ``__iter__``; a batch's tag holds its items' keys (those of a dropped partial one go on)."""
        src, size = self.ds, self.batch_size
        holder: list[Any] = []
        tags: list[Any] = []
        for dp in src:
            tags.append(src.position_tag)
            holder.append(dp)
            if len(holder) == size:
                self.position_tag = self._keys(tags)
                yield self._aggregate(holder)
                holder, tags = [], []
        if holder and self.remainder:
            self.position_tag = self._keys(tags)
            yield self._aggregate(holder)
        elif holder:
            self._skipped = join(self._skipped, join_all(tags))

    def _keys(self, tags: list[Any]) -> Any:
        keys = join_all(tags)
        if self._skipped is not None:
            keys, self._skipped = join(self._skipped, keys), None
        return keys

    def _aggregate(self, dps: list[Any]) -> Any:
        return aggregate_batch(dps, self.use_list)


class BatchDataByShape(BatchData):
    """Batch datapoints whose component ``idx`` has the same shape (e.g. images of one size).

    Datapoints wait in a group per shape until ``batch_size`` of them are there. Groups carry
    over between epochs (only :meth:`reset_state` empties them), so a rare shape may wait long;
    the length is therefore only an estimate, and a pass may end with no batch at all while its
    datapoints wait: :func:`~towerpack.dataflow.repeat_forever` goes on then, and runners count
    ``len`` datapoints per epoch as for any stage that mixes passes.
    """

    def __init__(self, ds: DataFlow, batch_size: int, idx: int | str) -> None:
        super().__init__(ds, batch_size, remainder=False)
        self.idx = idx
        self._groups: defaultdict[tuple, list[Any]] = defaultdict(list)
        self._group_tags: defaultdict[tuple, list[Any]] = defaultdict(list)  # tag mode

    def resume_step(self) -> Step:
        name = type(self).__name__  # groups fill up across passes
        return Step(inputs=(self.ds,), unordered=name, uncounted=name)

    def reset_state(self) -> None:
        super().reset_state()
        self._groups = defaultdict(list)
        self._group_tags = defaultdict(list)

    @property
    def held_over(self) -> int:
        """Datapoints waiting in their groups for a later pass."""
        return sum(len(g) for g in self._groups.values())

    def __iter__(self) -> Iterator[Any]:
        tagging = self._track.tags
        for dp in self.ds:
            shape = np.shape(dp[self.idx])
            group = self._groups[shape]
            group.append(dp)
            if tagging:
                self._group_tags[shape].append(self.ds.position_tag)
            if len(group) == self.batch_size:
                if tagging:
                    self.position_tag = self._keys(self._group_tags.pop(shape))
                yield self._aggregate(group)
                group.clear()
