"""How a node's launcher joins node 0 (or, in an elastic job, its coordinator), retrying what a busy node 0
explains.

When hundreds of nodes start at once, node 0 may answer late (its machine is loaded, or it is
welcoming the others), its listen queue may overflow, or it may answer ``BUSY``. None of that is final:
the agent tries again, after a wait that doubles each time (with random jitter, so that nodes refused
together do not come back together), and waits longer for the answers of each new attempt, until
``--start-timeout``. Nobody listening yet (node 0 not started) is retried every ``UNREACHABLE_RETRY_S``.
Only a definite refusal (wrong secret, another job's settings, a full job, frames node 0 could not
read) or frames that are not the protocol end the join at once.

An elastic job's coordinator may change (:mod:`towerpack.launcher.failover`), so ``--master`` may list
several of its nodes: ``join_any`` tries them in turn, and a node that does not coordinate answers
``ELSEWHERE`` with the address of the one that does, where the join goes on. ``try_join`` is one try,
its outcome typed, for the nodes looking for a new coordinator too.
"""

from __future__ import annotations

import enum
import random
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from towerpack.launcher import net, protocol
from towerpack.launcher.console import say
from towerpack.launcher.errors import (
    USAGE_EXIT,
    Closed,
    HandshakeTimeout,
    ProtocolError,
    Refusal,
    Refused,
)
from towerpack.launcher.protocol import Connection, Join, Side, Welcome

#: Seconds to wait for each answer of the first handshake; doubled after each one that timed out.
FIRST_ANSWER_S = 5.0
MAX_ANSWER_S = 60.0
#: Seconds before the first retry after a busy node 0, doubled each time up to the cap (plus jitter).
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 10.0
#: Seconds between attempts while nobody listens at node 0's address (it is not started yet).
UNREACHABLE_RETRY_S = 0.3


class JoinFailed(Exception):
    """The node could not join: ``code`` is the launcher's exit code (2 for a definite refusal)."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


@dataclass
class Backoff:
    """Waits that double from ``first`` up to ``cap``, each drawn from its upper half at random."""

    first: float = FIRST_BACKOFF_S
    cap: float = MAX_BACKOFF_S
    rng: random.Random = field(default_factory=random.Random)
    _tries: int = 0

    def next(self) -> float:
        wait = min(self.cap, self.first * 2**self._tries)
        self._tries += 1
        return wait * self.rng.uniform(0.5, 1.0)


class Answer(enum.Enum):
    """What one try at joining brought."""

    WELCOME = "welcome"  # joined
    NOBODY = "nobody"  # connection refused: no launcher listens there (not started yet, or gone)
    UNREACHABLE = "unreachable"  # no route, or the connect timed out (a full listen queue, a cut link)
    CLOSED = "closed"  # the connection ended before an answer
    SILENT = "silent"  # no answer within the wait
    BUSY = "busy"  # refused for now: worth another try
    ELSEWHERE = "elsewhere"  # that node does not coordinate; ``elsewhere`` is the one that does
    REFUSED = "refused"  # a definite refusal (wrong secret, another job, a full job)
    BROKEN = "broken"  # frames that are not the protocol


@dataclass(frozen=True)
class Try:
    """One try at joining: its answer, in words too, and what comes with it."""

    answer: Answer
    detail: str = ""
    conn: Connection | None = None  # WELCOME
    welcome: Welcome | None = None  # WELCOME
    elsewhere: tuple[str, int] | None = None  # ELSEWHERE
    refusal: Refusal | None = None  # BUSY, ELSEWHERE, REFUSED


def try_join(addr: str, port: int, secret: bytes, msg: Join, wait: float) -> Try:
    """Connect to ``addr:port`` and join with ``msg`` once, waiting up to ``wait`` s for the connection
    and for each answer."""
    try:
        sock = socket.create_connection((addr, port), timeout=wait)
    except ConnectionRefusedError:
        return Try(Answer.NOBODY, "nobody listens there")
    except OSError as exc:
        return Try(Answer.UNREACHABLE, exc.strerror or str(exc) or "timed out")
    try:
        conn = Connection(sock, Side.AGENT)
    except OSError:  # reset at once
        sock.close()
        return Try(Answer.CLOSED)
    try:
        welcome = protocol.agent_handshake(conn, secret, msg, timeout=wait)
        return Try(Answer.WELCOME, conn=conn, welcome=welcome)
    except Refused as exc:
        conn.close()
        if exc.refusal is Refusal.ELSEWHERE and exc.elsewhere:
            return Try(Answer.ELSEWHERE, str(exc), elsewhere=exc.elsewhere, refusal=exc.refusal)
        kind = Answer.REFUSED if exc.refusal.definite else Answer.BUSY
        return Try(kind, str(exc), refusal=exc.refusal)
    except HandshakeTimeout:
        conn.close()
        return Try(Answer.SILENT, f"no answer within {wait:g} s")
    except ProtocolError as exc:
        conn.close()
        return Try(Answer.BROKEN, str(exc))
    except (Closed, OSError) as exc:
        conn.close()
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else "during the handshake"
        return Try(Answer.CLOSED, detail)


def join(
    addr: str,
    port: int,
    secret: bytes,
    msg: Join,
    timeout: float,
    give_up: Callable[[], bool] = lambda: False,
) -> tuple[Connection, Welcome]:
    """Connect to node 0 at ``addr:port`` and join with ``msg``, retrying for up to ``timeout`` seconds
    (see the module's docstring); ``give_up()`` true (a signal came) stops the retries. Raises
    JoinFailed."""
    return join_any([(addr, port)], secret, msg, timeout, give_up)


def join_any(
    targets: Sequence[tuple[str, int]],
    secret: bytes,
    msg: Join,
    timeout: float,
    give_up: Callable[[], bool] = lambda: False,
) -> tuple[Connection, Welcome]:
    """``join`` the coordinator of an elastic job at any of ``targets`` (``--master`` may list several
    nodes): each is tried in turn while nobody answers there, and a node that does not coordinate
    sends this one on to the node that does."""
    one = len(targets) == 1
    who = "node 0" if one else "the coordinator"
    listed = ", ".join(net.host_port(*t) for t in targets)
    deadline = time.monotonic() + timeout
    answer, backoff = FIRST_ANSWER_S, Backoff()
    problem = None  # why the last handshake failed (None: none was tried)
    unreachable = ""  # why the last connect failed, if not refused
    turn, redirect, hops = 0, None, 0  # hops: redirects followed in a row
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or give_up():
            where = f"{who} at {listed}" if one else f"{who} at any of {listed}"
            if problem is None:
                why = f" ({unreachable})" if unreachable else ""
                raise JoinFailed(f"could not reach {where} within {timeout:g} s{why}", 1)
            raise JoinFailed(f"could not join {where} within {timeout:g} s: {problem}", 1)
        target = redirect or targets[turn % len(targets)]
        where = net.host_port(*target)
        wait = min(answer, remaining)
        got = try_join(*target, secret, msg, wait)
        if got.answer is Answer.WELCOME:
            return got.conn, got.welcome
        if got.answer in (Answer.NOBODY, Answer.UNREACHABLE):
            redirect, turn = None, turn + (redirect is None)
            if got.answer is Answer.NOBODY:
                _sleep(UNREACHABLE_RETRY_S * random.uniform(0.5, 1.5), deadline, give_up)
            else:
                unreachable = got.detail
                _sleep(backoff.next(), deadline, give_up)
            continue
        if got.answer is Answer.ELSEWHERE:
            redirect, hops = got.elsewhere, hops + 1
            if redirect not in targets:  # news: a coordinator that --master does not list
                say(f"{where}: {got.detail}; joining there")
            if hops > len(targets):  # sent round in a circle while the coordinator changes
                _sleep(backoff.next(), deadline, give_up)
            continue
        hops = 0
        if got.answer is Answer.REFUSED:
            hint = ""
            if got.refusal is Refusal.WRONG_SECRET:
                hint = " (every node needs the same job secret: see --secret-file)"
            raise JoinFailed(f"{who} refused this node: {got.detail}{hint}", USAGE_EXIT)
        if got.answer is Answer.BROKEN:
            raise JoinFailed(f"could not join {who} at {where}: {got.detail}", 1)
        if got.answer is Answer.SILENT:
            problem = f"{who} did not answer within {wait:g} s"
            answer = min(2 * answer, MAX_ANSWER_S)
        elif got.answer is Answer.BUSY:
            problem = f"{who} is busy ({got.detail})"
        else:
            problem = f"{who} closed the connection" + (f" ({got.detail})" if got.detail else "")
        pause = backoff.next()
        say(f"joining {who} at {where}: {problem}; trying again in {pause:.1f} s")
        _sleep(pause, deadline, give_up)


def _sleep(seconds: float, deadline: float, give_up: Callable[[], bool]) -> None:
    """Sleep ``seconds`` (not past ``deadline``), waking early when ``give_up()`` turns true."""
    end = min(time.monotonic() + seconds, deadline)
    while not give_up() and (left := end - time.monotonic()) > 0:
        time.sleep(min(left, 0.1))
