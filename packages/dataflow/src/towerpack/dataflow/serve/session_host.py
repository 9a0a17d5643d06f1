"""The server's side of exact-resume sessions: joins, the pipeline of each generation, refusals.

A :class:`~towerpack.dataflow.serve.server.DataServer` holds one :class:`SessionHost` and hands it
the session messages (the protocol is in :mod:`towerpack.dataflow.serve.session`); without the
server's ``factory`` the host refuses every join. The host acts on the server's consumers only
through the :class:`ServerHooks` it is given. In a session the server serves its members only: a consumer that
is not one is asked to join; the pipeline is made anew from the factory at every start of a session
(a *generation*), tracked in tag mode with fixed shares (``--shard I/N``), and every datapoint goes
out as ``[generation, keys, datapoint]`` (``keys``: the tag's keys as an ``int64`` array, so that
the header stays the same from one datapoint to the next and a consumer validates it once).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..pipeline.base import DataFlow
from ..resume.keys import as_keys
from ..resume.tracker import PositionMode, PositionTracker
from ..wire import control
from ..wire.codec import encode
from ..wire.control import Join, Joined, Refused, Rejoin
from .session import JoinResult, Session, decode_taken

__all__ = ["Entry", "ServerHooks", "SessionHost"]

logger = logging.getLogger(__name__)

#: A datapoint as the server keeps it until it is acknowledged: its frames and its tag (None
#: outside sessions).
Entry = tuple[list, Any]


@dataclass(frozen=True)
class ServerHooks:
    """What a session host may do to its server's consumers."""

    #: Send consumer ``ident`` a control message; whether it went (or the consumer is gone).
    tell: Callable[[bytes, control.Message], bool]
    #: Drop the account of consumer ``ident`` (its next window opens a new one); return what it had
    #: been sent and had not acknowledged.
    forget: Callable[[bytes], list[Entry]]
    #: Send these datapoints before any new one.
    serve_again: Callable[[list[Entry]], None]
    #: A session begins: stop the dataflow of consumers outside sessions, forget every consumer and
    #: every datapoint waiting to be sent again.
    restart: Callable[[], None]


class SessionHost:
    """The sessions of a server made with ``factory`` (see the module docstring)."""

    def __init__(
        self,
        factory: Callable[[], DataFlow] | None,
        hooks: ServerHooks,
        report: Callable[[str], None],
        allow_pickle: bool = False,
    ) -> None:
        self.factory = factory
        self.hooks = hooks
        self.report = report
        self.allow_pickle = allow_pickle
        self.session: Session | None = None
        self._superseded: set[str] = set()
        #: The generation number before the next: random, so that no two server processes use one number.
        self._generation = 0
        self._tracked: tuple[DataFlow, Iterator[tuple[Any, Any]]] | None = None
        self._tracked_size = 0  # items in the dataset the current generation serves

    @property
    def active(self) -> bool:
        """Whether a session holds the server (it then serves its members only)."""
        return self.session is not None

    @property
    def serving(self) -> bool:
        """Whether the session's pipeline runs (every rank has joined)."""
        return self.session is not None and bool(self.session.generation)

    def admits(self, ident: bytes, key: str | None) -> bool:
        """Whether consumer ``ident`` may be served: the members of the current session, or anyone
        outside sessions while there is none. ``key``: the session a window announcement names (None:
        of none, or an acknowledgement, which names none)."""
        session = self.session
        if session is None:
            return key is None
        return ident in session.members.values() and key in (None, session.key)

    def ask_to_join(self, ident: bytes) -> None:
        self.hooks.tell(ident, Rejoin())

    def returning(self, ident: bytes) -> None:
        """Consumer ``ident`` asks for data again: a member that had disconnected joins first, saying
        what it took."""
        if self.session is not None and ident in self.session.orphans:
            self.ask_to_join(ident)

    def orphan(self, ident: bytes, unacked: list[Entry]) -> None:
        """Member ``ident`` disconnected: keep what it had not acknowledged until it joins again."""
        self.session.orphans.setdefault(ident, []).extend(unacked)

    def on_join(self, ident: bytes, join: Join) -> None:
        if self.factory is None:
            self._refuse(
                ident,
                "this server was given a DataFlow, not a factory, so it cannot start its pipeline at a job's "
                "position: serve it with `dataflow serve` (or DataServer(factory=...))",
            )
            return
        if join.key in self._superseded:
            self._refuse(ident, "superseded by a newer job: another start of the job joined this server")
            return
        try:
            taken = decode_taken(join.taken)
            session = self.session
            if session is None or session.key != join.key:
                session = self._new_session(Session.of(join))
        except ValueError as e:
            self._refuse(ident, f"a malformed join: {e}")
            return
        why = session.check(join)
        if why is not None:
            self._refuse(ident, why)
            return
        result = session.join(ident, join, taken)
        if result is JoinResult.WAITING:
            self.report(f"session {join.key}: {len(session.members)} of {session.world} ranks joined")
        elif result is JoinResult.COMPLETE:
            self._start_generation()
        else:  # a rank joins a session already served, or again after it reconnected
            unacked = self.hooks.forget(ident)
            if result is JoinResult.AGAIN:  # what it was sent and did not take goes out again
                self.orphan(ident, unacked)
                again = session.orphans_to_serve(ident, taken, join.done)
                self.hooks.serve_again(again)
                self.report(
                    f"session {join.key}: rank {join.rank} joined again; {len(again)} datapoints go again"
                )
            self.hooks.tell(ident, Joined(session.generation, self._tracked_size))

    def next_message(self) -> Entry | None:
        """The next datapoint of the session's pipeline as frames, with its tag (None: not served yet)."""
        session = self.session
        if not session.generation:
            return None
        tag, dp = next(self._tracked[1])
        return encode([session.generation, as_keys(tag), dp], self.allow_pickle), tag

    def close(self) -> None:
        """Stop the session's pipeline (the server stops)."""
        self._stop_tracked()

    # -- sessions and generations ------------------------------------------------------------

    def _refuse(self, ident: bytes, reason: str) -> None:
        self.hooks.tell(ident, Refused(reason[:4000]))

    def _new_session(self, session: Session) -> Session:
        """``session`` replaces the current one (its consumers are refused from now on)."""
        old = self.session
        if old is not None:
            self._superseded.add(old.key)
            self.report(f"session {session.key} (a new start of the job) replaces session {old.key}")
        self.session = session
        self._stop_tracked()
        self.hooks.restart()
        return session

    def _start_generation(self) -> None:
        """Every rank has joined: start the pipeline at the union of the start and what they received."""
        session = self.session
        self._stop_tracked()
        try:
            df = self.factory()
            tracker = PositionTracker.of(df)
            position = session.union(tracker.size)
            tracker.start(position, PositionMode.TAGS, fixed_ranks=True)
            df.reset_state()
        except Exception as e:  # a pipeline that cannot be tracked, a dataset of another size ...
            logger.exception("session %s: the pipeline cannot start", session.key)
            for ident in session.members.values():
                self._refuse(ident, f"the server's pipeline cannot start at the job's position: {e}")
            self._superseded.add(session.key)
            self.session = None
            return
        self._generation = self._generation + 1 if self._generation else random.randrange(1, 1 << 40)
        session.generation = self._generation
        self._tracked = (df, tracker.pairs())
        self._tracked_size = tracker.size
        for ident in session.members.values():  # their accounts start again (the consumers' do too)
            self.hooks.forget(ident)
            self.hooks.tell(ident, Joined(session.generation, tracker.size))
        self.report(
            f"session {session.key}: {session.world} ranks joined; generation {session.generation} serves "
            f"from epoch {position.epoch} ({position.count} of {tracker.size} items done)"
        )

    def _stop_tracked(self) -> None:
        if self._tracked is not None:
            close = getattr(self._tracked[0], "close", None)
            if callable(close):
                close()
            self._tracked = None
