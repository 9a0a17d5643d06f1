"""Exact resume through data servers: one job's session on a server, and what its consumers send.

A job (one start of it: fresh, resumed, at any world size) has a session key that all its ranks
share. Every rank *joins* every server with the key, its rank, the world size, the position the job
starts from, and the keys of the items it has received in this session from any server (nothing at
a start; everything it took after a server restart, since all of that will be trained on). A server
serves a session once every rank has joined, from the union of the start and what they received:
:meth:`Session.union`. So a restarted server serves nothing twice and loses nothing, and a job that
starts again (a new key) makes the server start its pipeline again where the job's checkpoint says.

Each start of the server's pipeline is a *generation*; datapoints carry its number, so a consumer
drops those of an older one that were still in its socket (it had not taken them: they are served
again). The wire side lives in :mod:`towerpack.dataflow.serve.server` and
:mod:`towerpack.dataflow.serve.remote`.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..resume.keys import as_keys, epochs_of, join_all
from ..resume.ledger import Ledger
from ..resume.position import DataPosition
from ..resume.ranges import expand, runs_of
from ..wire.control import Join

__all__ = ["ConsumerSession", "JoinResult", "Session", "decode_taken", "encode_taken"]


def encode_taken(keys: np.ndarray) -> bytes:
    """``keys`` as the little-endian int64 ``(start, stop)`` ranges a :class:`Join` carries."""
    starts, lengths = runs_of(np.unique(np.asarray(keys, dtype=np.int64)))
    return np.stack([starts, starts + lengths], axis=1).astype("<i8").tobytes()


def decode_taken(data: bytes) -> np.ndarray:
    """The keys of :func:`encode_taken`'s ranges; ``ValueError`` if they are not ranges."""
    if len(data) % 16:
        raise ValueError(f"a join's taken keys are {len(data)} bytes, not int64 pairs")
    pairs = np.frombuffer(data, dtype="<i8").reshape(-1, 2).astype(np.int64)
    if len(pairs) and (np.any(pairs[:, 1] <= pairs[:, 0]) or np.any(pairs[:, 0] < 0)):
        raise ValueError("a join's taken keys are not (start, stop) ranges")
    lengths = pairs[:, 1] - pairs[:, 0]
    if int(lengths.sum()) > 1 << 31:
        raise ValueError("a join's taken keys are too many")
    return expand(pairs[:, 0], lengths)


class JoinResult(enum.Enum):
    """What a join does to a session."""

    WAITING = "waiting"  # gathering: more ranks are to join
    COMPLETE = "complete"  # the last rank joined: start the pipeline
    LATE = "late"  # a rank that joins a session already served
    AGAIN = "again"  # a rank that joined before joins again (it reconnected)


@dataclass
class Session:
    """A job's session on one server (see the module docstring)."""

    key: str
    world: int
    start: DataPosition | None
    members: dict[int, bytes] = field(default_factory=dict)  # rank -> consumer
    taken: dict[int, np.ndarray] = field(default_factory=dict)  # rank -> keys it said it received
    done: int = 1  # every epoch before it is trained on (the ranks said so)
    generation: int = 0  # the pipeline serving it; 0 while gathering
    #: What consumers that disconnected had not acknowledged: ``(frames, tag)`` per consumer.
    orphans: dict[bytes, list[tuple[list, Any]]] = field(default_factory=dict)

    @classmethod
    def of(cls, join: Join) -> Session:
        start = DataPosition.from_json(join.start) if join.start else None
        return cls(join.key, join.world, start)

    def check(self, join: Join) -> str | None:
        """Why ``join`` (of this session's key) cannot be taken, or None."""
        if join.world != self.world or join.rank >= self.world:
            return (
                f"rank {join.rank} of {join.world} joined a session of {self.world} ranks: the ranks of "
                "one job disagree on the world size"
            )
        start = DataPosition.from_json(join.start) if join.start else None
        if start != self.start:
            return "the ranks of one job start from different data positions"
        return None

    def join(self, ident: bytes, join: Join, taken: np.ndarray) -> JoinResult:
        """Take ``join`` from consumer ``ident`` (after :meth:`check`)."""
        known = self.members.get(join.rank)
        self.members[join.rank] = ident
        self.taken[join.rank] = taken
        self.done = max(self.done, join.done)
        if self.generation:
            return JoinResult.AGAIN if known is not None else JoinResult.LATE
        return JoinResult.COMPLETE if len(self.members) == self.world else JoinResult.WAITING

    def union(self, size: int) -> DataPosition:
        """Where the pipeline starts: the job's start, less what the ranks said they received."""
        if self.start is not None:
            self.start.check_size(size, "the served dataset")
        ledger = Ledger(self.start, size)
        ledger.finish_before(self.done)
        for keys in self.taken.values():
            ledger.add(keys)
        return ledger.position()

    def orphans_to_serve(self, ident: bytes, taken: np.ndarray, done: int) -> list[tuple[list, Any]]:
        """The ``(frames, tag)`` that consumer ``ident`` had not acknowledged when it disconnected and
        did not receive (``taken``: all it received of epochs ``done`` and later): to be served again."""
        received = set(taken.tolist())

        def got(tag: Any) -> bool:
            keys = as_keys(tag)
            pairs = zip(keys.tolist(), epochs_of(keys).tolist(), strict=True)
            return all(k in received or epoch < done for k, epoch in pairs)

        return [(frames, tag) for frames, tag in self.orphans.pop(ident, []) if not got(tag)]


class ConsumerSession:
    """A consumer's side of a session: its job's key, rank and start, and the keys of all it took.

    The keys of epochs the job has finished (:meth:`set_done_before`, from the trainer's count) are
    let go: a join says that those epochs are done instead.
    """

    #: Tags kept as they came before they become one array of keys (a chunk).
    _MERGE_EVERY = 4096

    def __init__(self, start: DataPosition | None, rank: int, world: int) -> None:
        self.start = start
        self.rank, self.world = rank, world
        self.key: str | None = None
        self.size: int | None = None  # of the served dataset, once a server has said
        self.done = start.epoch if start is not None else 1
        self._key_set = threading.Event()
        self._lock = threading.Lock()
        self._taken: list[Any] = []  # tags as they came
        self._chunks: list[np.ndarray] = []  # keys of earlier tags (each key once: no merge needed)

    def set_key(self, key: tuple[int, int]) -> None:
        self.key = "".join(f"{int(v):06x}" for v in key)
        self._key_set.set()

    def wait_key(self, timeout: float) -> bool:
        return self._key_set.wait(timeout)

    def took(self, tag: Any) -> None:
        """The consumer took a datapoint with ``tag``."""
        with self._lock:
            self._taken.append(tag)
            if len(self._taken) >= self._MERGE_EVERY:
                self._chunks.append(join_all(self._taken))
                self._taken = []

    def set_done_before(self, epoch: int) -> None:
        """Every epoch before ``epoch`` is trained on (by the job)."""
        if epoch <= self.done:
            return
        with self._lock:
            self.done = int(epoch)
            keys = self._keys()
            self._chunks, self._taken = [keys[epochs_of(keys) >= epoch]], []

    def _keys(self) -> np.ndarray:
        return np.concatenate([*self._chunks, join_all(self._taken)])

    def join_message(self) -> Join:
        with self._lock:
            taken = encode_taken(self._keys())
        start = self.start.to_json() if self.start is not None else ""
        return Join(self.key, self.rank, self.world, start, taken, self.done)
