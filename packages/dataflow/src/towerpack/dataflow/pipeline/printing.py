"""PrintData: look at the first datapoints going through a pipeline (structure, shapes, ranges)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import numpy as np

from .base import DataFlow, ProxyDataFlow

__all__ = ["PrintData", "describe_datapoint"]

logger = logging.getLogger(__name__)


def _describe(x: Any, depth: int, max_depth: int, max_list: int, indent: str) -> list[str]:
    if isinstance(x, np.ndarray):
        line = f"ndarray {x.dtype} shape={list(x.shape)}"
        if x.size and x.dtype.kind in "biuf":
            line += f" range=[{x.min()}, {x.max()}]"
        return [indent + line]
    if isinstance(x, (list, tuple, dict)):
        items = list(x.items()) if isinstance(x, dict) else list(enumerate(x))
        lines = [f"{indent}{type(x).__name__} of {len(items)}"]
        if depth >= max_depth:
            return [lines[0] + " ..."]
        for k, v in items[:max_list]:
            sub = _describe(v, depth + 1, max_depth, max_list, indent + "  ")
            lines.append(f"{indent}  [{k!r}]: {sub[0].lstrip()}")
            lines += sub[1:]
        if len(items) > max_list:
            lines.append(f"{indent}  ... {len(items) - max_list} more")
        return lines
    if isinstance(x, (bytes, bytearray)):
        return [f"{indent}bytes of length {len(x)}"]
    text = repr(x)
    return [f"{indent}{type(x).__name__} {text if len(text) <= 60 else text[:57] + '...'}"]


def describe_datapoint(dp: Any, max_depth: int = 3, max_list: int = 3) -> str:
    """A tree of a datapoint's structure: types, array dtypes, shapes and value ranges."""
    return "\n".join(_describe(dp, 0, max_depth, max_list, ""))


class PrintData(ProxyDataFlow):
    """Pass datapoints through unchanged, logging the structure of the first ``num`` of them.

    The count restarts only at :meth:`reset_state`, so a long run logs ``num`` datapoints once.
    """

    def __init__(
        self, ds: DataFlow, num: int = 1, name: str | None = None, max_depth: int = 3, max_list: int = 3
    ) -> None:
        super().__init__(ds)
        self.num = num
        self.name = name or type(ds).__name__
        self.max_depth = max_depth
        self.max_list = max_list
        self._printed = 0

    def reset_state(self) -> None:
        super().reset_state()
        self._printed = 0

    def __iter__(self) -> Iterator[Any]:
        for dp in self.ds:
            if self._printed < self.num:
                self._printed += 1
                tree = describe_datapoint(dp, self.max_depth, self.max_list)
                logger.info("PrintData %s, datapoint %d:\n%s", self.name, self._printed, tree)
            yield dp
