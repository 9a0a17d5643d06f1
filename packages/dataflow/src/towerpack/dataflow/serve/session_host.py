"""The server's side of exact-resume sessions: joins, the pipeline of each generation, refusals.

A mixin of :class:`~towerpack.dataflow.serve.server.DataServer` (the protocol is in
:mod:`towerpack.dataflow.serve.session`). In a session the server serves its members only: a
consumer that is not one is asked to join; the pipeline is made anew from the server's factory at
every start of a session (a *generation*), tracked in tag mode with fixed shares
(``--shard I/N``), and every datapoint goes out as ``[generation, tag, datapoint]``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator
from typing import Any

from ..pipeline.base import DataFlow
from ..resume.tracker import PositionMode, PositionTracker
from ..wire import control
from ..wire.codec import encode
from ..wire.control import Join, Joined, Refused, Rejoin
from .session import JoinResult, Session, decode_taken

__all__ = ["SessionHost"]

logger = logging.getLogger(__name__)


class SessionHost:
    """Sessions for a server with a ``factory`` (see the module docstring)."""

    factory: Callable[[], DataFlow] | None
    report: Callable[[str], None]
    allow_pickle: bool
    peers: dict
    _order: Any
    _pending: Any
    _session: Session | None = None
    _superseded: set[str]
    #: The generation number before the next: random, so that no two server processes use one number.
    _generation = 0
    _tracked: tuple[DataFlow, Iterator[tuple[Any, Any]]] | None = None
    _tracked_size = 0  # items in the dataset the current generation serves

    def _send_control(self, ident: bytes, frames: list) -> bool:  # the server's
        raise NotImplementedError

    def _close_untracked(self) -> None:  # the server's
        raise NotImplementedError

    def _refuse(self, ident: bytes, reason: str) -> None:
        self._send_control(ident, control.encode(Refused(reason[:4000])))

    def _member(self, ident: bytes, key: str | None) -> bool:
        """Whether consumer ``ident`` may be served: the members of the current session, or anyone
        outside sessions while there is none. ``key``: the session a window announcement names (None:
        of none, or an acknowledgement, which names none)."""
        session = self._session
        if session is None:
            return key is None
        return ident in session.members.values() and key in (None, session.key)

    def _ask_to_join(self, ident: bytes) -> None:
        self._send_control(ident, control.encode(Rejoin()))

    def _on_join(self, ident: bytes, join: Join) -> None:
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
            session = self._session
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
            if result is JoinResult.AGAIN:  # what it was sent and did not take goes out again
                peer = self.peers.get(ident)
                if peer is not None:
                    self._orphan(ident, peer.unacked)
                again = session.orphans_to_serve(ident, taken, join.done)
                self._pending.extend(again)
                self.report(
                    f"session {join.key}: rank {join.rank} joined again; {len(again)} datapoints go again"
                )
            self._forget_peer(ident)
            self._send_control(ident, control.encode(Joined(session.generation, self._tracked_size)))

    def _new_session(self, session: Session) -> Session:
        """``session`` replaces the current one (its consumers are refused from now on)."""
        old = self._session
        if old is not None:
            self._superseded.add(old.key)
            self.report(f"session {session.key} (a new start of the job) replaces session {old.key}")
        self._session = session
        self._stop_tracked()
        self._close_untracked()
        for ident in list(self.peers):
            self._forget_peer(ident)
        self._pending.clear()
        return session

    def _forget_peer(self, ident: bytes) -> None:
        """Drop the account of consumer ``ident``; its next window announcement opens a new one."""
        if self.peers.pop(ident, None) is not None:
            self._order.remove(ident)

    def _start_generation(self) -> None:
        """Every rank has joined: start the pipeline at the union of the start and what they received."""
        session = self._session
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
            self._session = None
            return
        self._generation = self._generation + 1 if self._generation else random.randrange(1, 1 << 40)
        session.generation = self._generation
        self._tracked = (df, tracker.pairs())
        self._tracked_size = tracker.size
        for ident in session.members.values():
            self._forget_peer(ident)
            self._send_control(ident, control.encode(Joined(session.generation, tracker.size)))
        self.report(
            f"session {session.key}: {session.world} ranks joined; generation {session.generation} serves "
            f"from epoch {position.epoch} ({position.count} of {tracker.size} items done)"
        )

    def _tracked_message(self) -> tuple[list, Any] | None:
        """The next datapoint of the session's pipeline as frames, with its tag (None: not served yet)."""
        session = self._session
        if not session.generation:
            return None
        tag, dp = next(self._tracked[1])
        return encode([session.generation, tag, dp], self.allow_pickle), tag

    def _orphan(self, ident: bytes, unacked: Any) -> None:
        """A member disconnected: keep what it had not acknowledged until it joins again."""
        self._session.orphans.setdefault(ident, []).extend(unacked)

    def _returning(self, ident: bytes) -> None:
        """A member that had disconnected asks for data again: it joins first, saying what it took."""
        if self._session is not None and ident in self._session.orphans:
            self._ask_to_join(ident)

    def _stop_tracked(self) -> None:
        if self._tracked is not None:
            close = getattr(self._tracked[0], "close", None)
            if callable(close):
                close()
            self._tracked = None
