"""MapData, MapDataComponent and SelectComponent: apply a function to every datapoint (or one component)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ..resume.keys import join
from ..resume.protocol import Step
from .base import DataFlow, ProxyDataFlow

__all__ = ["MapData", "MapDataComponent", "SelectComponent"]


class MapData(ProxyDataFlow):
    """Yield ``func(dp)`` for every datapoint; a ``None`` result drops the datapoint.

    The length is the input's, which is only an upper bound when ``func`` may return ``None``.
    """

    #: Tag mode (see :mod:`towerpack.dataflow.resume.tags`): the tag of the datapoint yielded last,
    #: and those of dropped ones, which go with the next.
    _skipped: Any = None

    def __init__(self, ds: DataFlow, func: Callable[[Any], Any]) -> None:
        super().__init__(ds)
        self.func = func

    def resume_step(self) -> Step:
        # One datapoint per input: a None result is caught when replaying, carried with tags.
        return Step(inputs=(self.ds,))

    def __iter__(self) -> Iterator[Any]:
        if self._track.tags:
            yield from self._iter_tagged()
            return
        for dp in self.ds:
            out = self.func(dp)
            if out is not None:
                yield out

    def _iter_tagged(self) -> Iterator[Any]:
        src, func = self.ds, self.func
        for dp in src:
            tag = src.position_tag
            out = func(dp)
            if out is None:
                self._skipped = join(self._skipped, tag)
                continue
            if self._skipped is not None:
                tag, self._skipped = join(self._skipped, tag), None
            self.position_tag = tag
            yield out


class MapDataComponent(MapData):
    """Replace component ``index`` (a list index or dict key) with ``func(component)``; ``None`` drops it.

    The input datapoint is not modified: a shallow copy is yielded.
    """

    def __init__(self, ds: DataFlow, func: Callable[[Any], Any], index: int | str = 0) -> None:
        self.component_func = func
        self.index = index
        super().__init__(ds, self._apply)

    def _apply(self, dp: Any) -> Any:
        value = self.component_func(dp[self.index])
        if value is None:
            return None
        if isinstance(dp, dict):
            out = dict(dp)
        else:
            out = list(dp)
        out[self.index] = value
        return tuple(out) if isinstance(dp, tuple) else out


class SelectComponent(MapData):
    """Yield ``[dp[i] for i in idxs]``: keep and reorder components."""

    def __init__(self, ds: DataFlow, idxs: list[int | str]) -> None:
        self.idxs = list(idxs)
        super().__init__(ds, self._select)

    def _select(self, dp: Any) -> list[Any]:
        return [dp[i] for i in self.idxs]
