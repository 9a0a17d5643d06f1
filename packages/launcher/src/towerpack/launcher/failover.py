"""Finding the next coordinator of an elastic job when the coordinator is lost.

Every agent holds the last membership the coordinator sent it (``Members``: the coordinator first,
then every node with the address its launcher listens on). When the coordinator is lost, each
surviving member goes through the other members in order of node id, the same order on every node,
and stops at the first one alive: a node that reaches itself takes over (``Next.LEAD``: it becomes an
:class:`~towerpack.launcher.elastic.ElasticCoordinator` on its own control port), and the others rejoin
it with their node id (``Next.JOINED``). A member whose port nobody answers on (its launcher is gone,
or it is cut off) is skipped; one that answers but has not noticed the loss yet is asked again for up
to ``patience`` seconds. Whether the node that takes over may run the job is the quorum's call
(:mod:`towerpack.launcher.quorum`), not this module's.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass

from towerpack.launcher import net
from towerpack.launcher.console import say
from towerpack.launcher.joining import Answer, Try, try_join
from towerpack.launcher.protocol import Connection, Join, Member, Members, Welcome

#: Seconds to wait for a connection or an answer from a member that may take over.
ANSWER_S = 2.0
#: Seconds between questions to a member that has not taken over (or let this node rejoin) yet.
RETRY_S = 0.2


class Next(enum.Enum):
    """What a member does once its coordinator is lost."""

    JOINED = "joined"  # it rejoined the member that took over
    LEAD = "lead"  # it takes over itself
    GAVE_UP = "gave up"  # a signal came while it looked


@dataclass(frozen=True)
class Found:
    next: Next
    coordinator: Member | None = None  # JOINED: the new coordinator
    conn: Connection | None = None  # JOINED
    welcome: Welcome | None = None  # JOINED
    gone: frozenset[int] = frozenset()  # members found gone on the way


def patience_for(heartbeat_timeout: float) -> float:
    """How long a member that answers may take to notice the loss (it hears of it by its own heartbeat
    timeout, at worst that long after this node) and to take over."""
    return 2 * heartbeat_timeout + 2 * ANSWER_S


def find(
    last: Members, join: Join, secret: bytes, patience: float, give_up: Callable[[], bool] = lambda: False
) -> Found:
    """The next coordinator after ``last``'s was lost, seen from the member ``last.you`` (``join`` is how
    it rejoins: with ``member=last.you``)."""
    gone: set[int] = set()
    for candidate in sorted(last.members[1:], key=lambda m: m.node):
        if candidate.node == last.you:
            return Found(Next.LEAD, gone=frozenset(gone))
        got = _rejoin(candidate, join, secret, patience, give_up)
        if got is None:
            return Found(Next.GAVE_UP, gone=frozenset(gone))
        if got.answer is Answer.WELCOME:
            return Found(Next.JOINED, candidate, got.conn, got.welcome, frozenset(gone))
        say(f"node {candidate.node} ({candidate.host}) will not take over: {got.detail or got.answer.value}")
        gone.add(candidate.node)
    raise ValueError(f"node {last.you} is not in the membership it was sent")


def _rejoin(
    candidate: Member, join: Join, secret: bytes, patience: float, give_up: Callable[[], bool]
) -> Try | None:
    """Rejoin ``candidate``, asking again while it answers that it has not taken over; its last answer,
    or None when ``give_up()`` turned true."""
    deadline = time.monotonic() + patience
    while not give_up():
        got = try_join(candidate.addr, candidate.port, secret, join, ANSWER_S)
        waiting = got.answer in (Answer.BUSY, Answer.ELSEWHERE, Answer.SILENT, Answer.CLOSED)
        if not waiting:
            return got
        if time.monotonic() > deadline:
            where = net.host_port(candidate.addr, candidate.port)
            return Try(got.answer, f"it did not take over within {patience:g} s ({where}: {got.detail})")
        time.sleep(RETRY_S)
    return None
