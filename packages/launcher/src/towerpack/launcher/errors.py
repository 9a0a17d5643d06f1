"""The launcher's exception types, so that callers tell failures apart by type, never by message text.

``UsageError`` ends `launch` with one clear line and exit code 2; the others are failures of the
control protocol between node launchers (see :mod:`towerpack.launcher.protocol`).
"""

from __future__ import annotations

import enum

#: Exit code for bad input (malformed host list, unknown GPU, busy port, missing script, ...).
USAGE_EXIT = 2


class UsageError(Exception):
    """Bad input: `launch` prints ``launch: error: <message>`` and exits with code 2."""


class ProtocolError(Exception):
    """A frame that is malformed, oversized, unauthenticated or unexpected."""


class AuthenticationError(ProtocolError):
    """A frame whose HMAC does not match: the sender lacks the job's secret, or replayed or altered it."""


class HandshakeTimeout(ProtocolError):
    """The peer did not answer in time during the handshake (it may only be busy: worth another try)."""


class Closed(Exception):
    """The peer closed the connection."""


class Refusal(enum.Enum):
    """Why the coordinator refused an agent (sent in its ``Reject`` message)."""

    WRONG_SECRET = "wrong secret"  # the agent's first authenticated frame failed authentication
    BROKEN = "broken"  # the agent's frames were not valid protocol messages
    MISMATCH = "mismatch"  # the agent's node or job settings do not fit the job node 0 runs (another job)
    FULL = "full"  # the job has all the nodes it takes (its MAX, or this node rank is in the running job)
    BUSY = "busy"  # not now: too many joins at once, or this node rank's earlier connection is still there
    ELSEWHERE = "elsewhere"  # not the coordinator (elastic jobs): the Reject names the node that is

    @property
    def definite(self) -> bool:
        """True when trying again cannot help (BUSY: try again; ELSEWHERE: try the address given)."""
        return self not in (Refusal.BUSY, Refusal.ELSEWHERE)


class Refused(Exception):
    """The coordinator refused this agent: ``refusal`` says why; the message is its explanation;
    ``elsewhere`` is the ``(addr, port)`` of the coordinator an ELSEWHERE refusal names."""

    def __init__(self, refusal: Refusal, reason: str, elsewhere: tuple[str, int] | None = None):
        super().__init__(reason)
        self.refusal = refusal
        self.elsewhere = elsewhere
