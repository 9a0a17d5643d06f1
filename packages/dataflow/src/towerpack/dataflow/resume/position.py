"""DataPosition: what a checkpoint records of the data.

A :class:`DataPosition` names the oldest epoch not finished, the positions of its order trained on,
and those of later epochs already begun. Sources continue one
(:mod:`towerpack.dataflow.resume.source`); checkpoints store :meth:`DataPosition.to_dict`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .protocol import PositionUnsupportedError
from .ranges import Ranges, complement, merge_ranges

__all__ = ["DataPosition", "PositionUnsupportedError", "Ranges"]


def _check_ranges(ranges: Ranges, size: int, what: str) -> Ranges:
    ranges = tuple((int(a), int(b)) for a, b in ranges)
    if merge_ranges(ranges) != ranges:
        raise ValueError(
            f"DataPosition: {what} must be sorted, disjoint, non-empty (start, stop) ranges, got {ranges}"
        )
    if ranges and (ranges[0][0] < 0 or ranges[-1][1] > size):
        raise ValueError(f"DataPosition: {what} ranges {ranges[0]}..{ranges[-1]} lie outside [0, {size})")
    return ranges


def _ranges_of(value: Any, what: str) -> Ranges:
    if not isinstance(value, list) or not all(
        isinstance(r, (list, tuple)) and len(r) == 2 and all(type(v) is int for v in r) for r in value
    ):
        raise ValueError(f"DataPosition: {what!r} must be a list of [start, stop] int pairs, got {value!r}")
    return tuple((a, b) for a, b in value)


@dataclass(frozen=True)
class DataPosition:
    """Where the data of a job stands: epoch ``epoch`` (from 1) of a dataset of ``size`` items, of
    which the positions in ``consumed`` (sorted, disjoint ``(start, stop)`` ranges of the epoch's
    order) were trained on. ``DataPosition(1, n)`` is the start of training.

    ``later`` holds ``(epoch, ranges)`` of later epochs already begun, for pipelines that mix epochs
    (an item of the next epoch trained on before the last ones of this one): a resume reads what is
    left of ``epoch``, then what is left of each later one."""

    epoch: int
    size: int
    consumed: Ranges = field(default=())
    later: tuple[tuple[int, Ranges], ...] = field(default=())

    def __post_init__(self) -> None:
        if not isinstance(self.epoch, int) or self.epoch < 1:
            raise ValueError(f"DataPosition: epoch must be an int >= 1, got {self.epoch!r}")
        if not isinstance(self.size, int) or self.size < 0:
            raise ValueError(f"DataPosition: size must be an int >= 0, got {self.size!r}")
        object.__setattr__(self, "consumed", _check_ranges(self.consumed, self.size, "consumed"))
        later, last = [], self.epoch
        for epoch, ranges in self.later:
            if not isinstance(epoch, int) or epoch <= last:
                raise ValueError(
                    f"DataPosition: later epochs must be increasing ints after {self.epoch}, got {epoch!r}"
                )
            ranges = _check_ranges(ranges, self.size, f"epoch {epoch}'s")
            if not ranges:
                raise ValueError(f"DataPosition: later epoch {epoch} has no consumed ranges")
            later.append((epoch, ranges))
            last = epoch
        object.__setattr__(self, "later", tuple(later))

    @classmethod
    def of(cls, epoch: int, size: int, positions: Iterable[tuple[int, int]]) -> DataPosition:
        """The position with ``positions`` (any ranges) consumed; a complete epoch is the next one's start."""
        return cls.of_epochs(size, {epoch: merge_ranges(positions)}, epoch)

    @classmethod
    def of_epochs(cls, size: int, epochs: dict[int, Ranges], first: int) -> DataPosition:
        """The position with ``epochs[e]`` consumed of each epoch ``e >= first`` (earlier ones done):
        it starts at the first epoch not complete."""
        full = ((0, size),) if size else ()
        epoch = first
        while size and merge_ranges(epochs.get(epoch, ())) == full:
            epoch += 1
        later = tuple(
            (e, merge_ranges(r)) for e, r in sorted(epochs.items()) if e > epoch and merge_ranges(r)
        )
        return cls(epoch, size, merge_ranges(epochs.get(epoch, ())), later)

    @property
    def count(self) -> int:
        """Items of the epoch consumed."""
        return sum(b - a for a, b in self.consumed)

    def consumed_in(self, epoch: int) -> Ranges:
        """The ranges consumed of ``epoch``: all of it before ``self.epoch``, nothing after the last begun."""
        if epoch < self.epoch:
            return ((0, self.size),) if self.size else ()
        if epoch == self.epoch:
            return self.consumed
        return dict(self.later).get(epoch, ())

    def left(self) -> list[tuple[int, int]]:
        """The positions of the epoch not consumed yet, as ranges in epoch order."""
        return complement(self.consumed, self.size)

    def check_size(self, size: int, what: str = "the dataset") -> None:
        """Raise ValueError when this position is of a dataset of another size than ``size``."""
        if self.size != size:
            raise ValueError(
                f"the data position is of a dataset of {self.size} items, but {what} has {size} items"
            )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "epoch": self.epoch,
            "size": self.size,
            "consumed": [list(r) for r in self.consumed],
        }
        if self.later:
            out["later"] = [[e, [list(r) for r in ranges]] for e, ranges in self.later]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DataPosition:
        keys = {"epoch", "size", "consumed"}
        if not isinstance(data, dict) or not keys <= set(data) <= keys | {"later"}:
            got = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise ValueError(
                f"DataPosition: expected the keys ['consumed', 'epoch', 'size'] (and 'later'), got {got}"
            )
        later = data.get("later", [])
        if not isinstance(later, list) or not all(
            isinstance(x, list) and len(x) == 2 and type(x[0]) is int for x in later
        ):
            raise ValueError(f"DataPosition: 'later' must be a list of [epoch, ranges] pairs, got {later!r}")
        return cls(
            data["epoch"],
            data["size"],
            _ranges_of(data["consumed"], "consumed"),
            tuple((e, _ranges_of(r, f"later epoch {e}")) for e, r in later),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> DataPosition:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"DataPosition: not JSON: {e}") from None
        return cls.from_dict(data)
