"""Slurm's compressed host lists (``n[01-02,7],login5``), expanded in one place for every package.

The launcher reads them to join the nodes of an ``srun`` step, the trainer to find the host of rank 0's
rendezvous store; neither depends on the other, so the expander lives here (it needs nothing else).
"""

from __future__ import annotations

import re

__all__ = ["HostListError", "expand_nodelist"]


class HostListError(ValueError):
    """A Slurm node list that does not parse; the message quotes it."""


_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_nodelist(nodelist: str) -> list[str]:
    """Expand Slurm's compressed host list, any number of bracket groups per name included:
    ``n[01-02,7],rack[1-2]-gpu[1-2]`` -> ``n01 n02 n7 rack1-gpu1 rack1-gpu2 rack2-gpu1 rack2-gpu2``."""
    hosts: list[str] = []
    for item in _split_top_level(nodelist):
        hosts.extend(_expand(item, nodelist))
    return hosts


def _split_top_level(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth not in (0, 1):
            raise HostListError(f"malformed Slurm node list {text!r}")
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise HostListError(f"malformed Slurm node list {text!r}")
    items.append(text[start:])
    if any(not item.strip() for item in items):
        raise HostListError(f"malformed Slurm node list {text!r}")
    return [item.strip() for item in items]


def _expand(item: str, whole: str) -> list[str]:
    head, bracket, rest = item.partition("[")
    if not bracket:
        return [item]
    ranges, _, tail = rest.partition("]")
    values = []
    for part in ranges.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise HostListError(f"malformed range {part!r} in Slurm node list {whole!r}")
        lo, hi = match.group(1), match.group(2) or match.group(1)
        if int(hi) < int(lo):
            raise HostListError(f"malformed range {part!r} in Slurm node list {whole!r}")
        values.extend(f"{n:0{len(lo)}d}" for n in range(int(lo), int(hi) + 1))
    return [f"{head}{v}{t}" for v in values for t in _expand(tail, whole)]
