"""Ranges of positions: sorted numbers as runs, runs back as numbers, and ``(start, stop)`` tuples.

Positions, keys and items travel as ranges everywhere exact resume stores or sends them (a
checkpoint's ``DataPosition``, a server session's join, the rows ranks all-gather); this module
is the one place numbers become ranges and ranges numbers.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["Ranges", "complement", "expand", "merge_ranges", "ranges_of", "ranges_of_mask", "runs_of"]

#: Sorted, disjoint, non-empty ``(start, stop)`` pairs.
Ranges = tuple[tuple[int, int], ...]
_EMPTY = np.zeros(0, np.int64)


def runs_of(numbers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, lengths)`` of the runs of consecutive values in sorted, distinct ``numbers``."""
    numbers = np.asarray(numbers, dtype=np.int64)
    if not len(numbers):
        return _EMPTY, _EMPTY
    breaks = np.flatnonzero(np.diff(numbers) != 1) + 1
    firsts = np.concatenate([[0], breaks])
    return numbers[firsts], np.diff(np.concatenate([firsts, [len(numbers)]]))


def expand(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The numbers of runs (the inverse of :func:`runs_of`)."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    if not len(lengths):
        return _EMPTY
    offsets = np.cumsum(lengths) - lengths
    return np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(starts - offsets, lengths)


def ranges_of(numbers: np.ndarray) -> list[tuple[int, int]]:
    """Sorted, distinct ``numbers`` as ``(start, stop)`` ranges."""
    starts, lengths = runs_of(numbers)
    return list(zip(starts.tolist(), (starts + lengths).tolist(), strict=True))


def ranges_of_mask(mask: np.ndarray) -> Ranges:
    """The ``(start, stop)`` ranges where a boolean array is True."""
    edges = np.diff(np.concatenate([[0], np.asarray(mask, bool).view(np.int8), [0]]))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return tuple(zip(starts.tolist(), stops.tolist(), strict=True))


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """``ranges`` sorted, with empty ones dropped and overlapping or touching ones merged."""
    out: list[list[int]] = []
    for start, stop in sorted((int(a), int(b)) for a, b in ranges if b > a):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], stop)
        else:
            out.append([start, stop])
    return tuple((a, b) for a, b in out)


def complement(ranges: Ranges, size: int) -> list[tuple[int, int]]:
    """The ranges of ``[0, size)`` that sorted, disjoint ``ranges`` leave."""
    free, pos = [], 0
    for start, stop in ranges:
        if start > pos:
            free.append((pos, start))
        pos = stop
    if pos < size:
        free.append((pos, size))
    return free
