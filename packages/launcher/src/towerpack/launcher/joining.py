"""How a node's launcher joins node 0, retrying what a busy node 0 explains.

When hundreds of nodes start at once, node 0 may answer late (its machine is loaded, or it is
welcoming the others), its listen queue may overflow, or it may answer ``BUSY``. None of that is final:
the agent tries again, after a wait that doubles each time (with random jitter, so that nodes refused
together do not come back together), and waits longer for the answers of each new attempt, until
``--start-timeout``. Nobody listening yet (node 0 not started) is retried every ``UNREACHABLE_RETRY_S``.
Only a definite refusal (wrong secret, another job's settings, a full job, frames node 0 could not
read) or frames that are not the protocol end the join at once.
"""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Callable
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
    where = net.host_port(addr, port)
    deadline = time.monotonic() + timeout
    answer, backoff = FIRST_ANSWER_S, Backoff()
    problem = None  # why the last handshake failed (None: none was tried)
    unreachable = ""  # why the last connect failed, if not refused
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or give_up():
            if problem is None:
                why = f" ({unreachable})" if unreachable else ""
                raise JoinFailed(f"could not reach node 0 at {where} within {timeout:g} s{why}", 1)
            raise JoinFailed(f"could not join node 0 at {where} within {timeout:g} s: {problem}", 1)
        wait = min(answer, remaining)
        try:
            sock = socket.create_connection((addr, port), timeout=wait)
        except ConnectionRefusedError:
            _sleep(UNREACHABLE_RETRY_S * random.uniform(0.5, 1.5), deadline, give_up)
            continue
        except OSError as exc:  # no route yet, or its listen queue is full (the connect timed out)
            unreachable = exc.strerror or str(exc) or "timed out"
            _sleep(backoff.next(), deadline, give_up)
            continue
        try:
            conn = Connection(sock, Side.AGENT)
        except OSError:  # reset at once
            sock.close()
            problem = "node 0 closed the connection"
            _sleep(backoff.next(), deadline, give_up)
            continue
        try:
            return conn, protocol.agent_handshake(conn, secret, msg, timeout=wait)
        except Refused as exc:
            conn.close()
            if exc.refusal.definite:
                wrong_secret = exc.refusal is Refusal.WRONG_SECRET
                hint = " (every node needs the same job secret: see --secret-file)" if wrong_secret else ""
                raise JoinFailed(f"node 0 refused this node: {exc}{hint}", USAGE_EXIT) from None
            problem = f"node 0 is busy ({exc})"
        except HandshakeTimeout:
            conn.close()
            problem = f"node 0 did not answer within {wait:g} s"
            answer = min(2 * answer, MAX_ANSWER_S)
        except ProtocolError as exc:
            conn.close()
            raise JoinFailed(f"could not join node 0 at {where}: {exc}", 1) from None
        except (Closed, OSError) as exc:
            conn.close()
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else "during the handshake"
            problem = f"node 0 closed the connection ({detail})"
        pause = backoff.next()
        say(f"joining node 0 at {where}: {problem}; trying again in {pause:.1f} s")
        _sleep(pause, deadline, give_up)


def _sleep(seconds: float, deadline: float, give_up: Callable[[], bool]) -> None:
    """Sleep ``seconds`` (not past ``deadline``), waking early when ``give_up()`` turns true."""
    end = min(time.monotonic() + seconds, deadline)
    while not give_up() and (left := end - time.monotonic()) > 0:
        time.sleep(min(left, 0.1))
