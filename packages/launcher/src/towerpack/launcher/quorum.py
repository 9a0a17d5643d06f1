"""The majority rule that keeps an elastic job one job when its network splits.

A node cut off from the others cannot tell their loss from its own isolation. So a side of the job
goes on only if it holds a quorum of the last membership every node agreed to: more than half of its
nodes, or exactly half when that half has the coordinator of that membership. Two disjoint sides can
never both hold one. The coordinator checks it at every membership change (its members confirm each
new membership with ``Agreed`` before the attempt starts, so no side can shrink the count on its own);
a node taking over from a lost coordinator needs it before the first attempt it runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Quorum:
    """The last agreed membership: its node ids and its coordinator's."""

    members: frozenset[int]
    coordinator: int

    @classmethod
    def of(cls, members: Iterable[int], coordinator: int) -> Quorum:
        return cls(frozenset(members), coordinator)

    @property
    def majority(self) -> int:
        """How many members make a majority."""
        return len(self.members) // 2 + 1

    def met_by(self, present: Iterable[int]) -> bool:
        """True when the nodes ``present`` (others are ignored) may go on as the job."""
        here = self.members.intersection(present)
        return 2 * len(here) > len(self.members) or (
            2 * len(here) == len(self.members) and self.coordinator in here
        )

    def shortfall(self, present: Iterable[int]) -> str:
        """Why ``present`` is no quorum, in words."""
        here = len(self.members.intersection(present))
        tie = 2 * here == len(self.members)
        n = len(self.members)
        if tie:
            return (
                f"no quorum: {here} of the {n} nodes of the last membership, half of them without its "
                f"coordinator (node {self.coordinator})"
            )
        return (
            f"no quorum: only {here} of the {n} nodes of the last membership, fewer than a majority "
            f"({self.majority})"
        )
