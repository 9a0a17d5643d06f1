"""A data server's session host: it acts on the server's consumers only through the hooks it is given
(tell, forget, serve again, restart), and serves a session once all its ranks have joined."""

from __future__ import annotations

import numpy as np
import pytest

from towerpack.dataflow import BatchData, DataFromList, IndexedList, decode
from towerpack.dataflow.resume.keys import as_keys
from towerpack.dataflow.serve.session import encode_taken
from towerpack.dataflow.serve.session_host import Entry, ServerHooks, SessionHost
from towerpack.dataflow.wire import control
from towerpack.dataflow.wire.control import Join, Joined, Refused, Rejoin

pytestmark = pytest.mark.timeout(60)


class Consumers:
    """The server's side of the hooks: what the host told, forgot, served again and restarted."""

    def __init__(self) -> None:
        self.told: list[tuple[bytes, control.Message]] = []
        self.forgotten: list[bytes] = []
        self.again: list[Entry] = []
        self.restarts = 0
        self.unacked: dict[bytes, list[Entry]] = {}

    def hooks(self) -> ServerHooks:
        again = self.again.extend
        return ServerHooks(tell=self.tell, forget=self.forget, serve_again=again, restart=self.restart)

    def tell(self, ident: bytes, msg: control.Message) -> bool:
        self.told.append((ident, msg))
        return True

    def forget(self, ident: bytes) -> list[Entry]:
        self.forgotten.append(ident)
        return self.unacked.pop(ident, [])

    def restart(self) -> None:
        self.restarts += 1

    def last(self, ident: bytes) -> control.Message:
        return [m for i, m in self.told if i == ident][-1]


def batches():
    return BatchData(IndexedList([[np.int64(i)] for i in range(16)], seed=3), 4)


def join(key: str, rank: int, world: int, taken: bytes = b"") -> Join:
    return Join(key, rank, world, "", taken)


def datapoint(entry: Entry) -> list:
    frames, _ = entry
    return decode([f if isinstance(f, bytes) else np.asarray(f).tobytes() for f in frames])


def test_a_session_is_served_once_every_rank_joined_and_a_new_start_of_the_job_replaces_it():
    server, said = Consumers(), []
    host = SessionHost(batches, server.hooks(), said.append)
    assert host.admits(b"anyone", None) and not host.active
    host.on_join(b"r0", join("k1", 0, 2))
    assert host.active and not host.serving and server.restarts == 1
    assert host.next_message() is None  # nothing before every rank has joined
    assert host.admits(b"r0", "k1") and not host.admits(b"r0", "k2") and not host.admits(b"other", None)
    host.on_join(b"r1", join("k1", 1, 2))
    assert host.serving and {b"r0", b"r1"} <= set(server.forgotten)  # their accounts start again
    joined = server.last(b"r0")
    assert isinstance(joined, Joined) and joined == server.last(b"r1") and joined.size == 16
    entry = host.next_message()
    generation, keys, dp = datapoint(entry)
    assert generation == joined.generation and keys.tolist() == as_keys(entry[1]).tolist()
    assert np.ravel(dp[0]).shape == (4,) and len(keys) == 4
    # Another start of the job: the server restarts, and a rank of the old session is refused.
    host.on_join(b"r2", join("k2", 0, 1))
    assert server.restarts == 2 and host.serving
    assert isinstance(server.last(b"r2"), Joined) and server.last(b"r2").generation == joined.generation + 1
    host.on_join(b"r0", join("k1", 0, 2))
    refused = server.last(b"r0")
    assert isinstance(refused, Refused) and "superseded by a newer job" in refused.reason
    assert any("session k2 (a new start of the job) replaces session k1" in line for line in said)


def test_a_member_that_comes_back_joins_again_and_gets_only_what_it_had_not_received():
    server, said = Consumers(), []
    host = SessionHost(batches, server.hooks(), said.append)
    host.on_join(b"r0", join("k", 0, 1))
    sent = [host.next_message() for _ in range(3)]
    host.orphan(b"r0", sent)  # the server dropped it with these unacknowledged
    host.returning(b"r0")  # it asks for data again
    assert isinstance(server.last(b"r0"), Rejoin)
    host.on_join(b"r0", join("k", 0, 1, encode_taken(as_keys(sent[1][1]))))  # the second came through
    assert server.again == [sent[0], sent[2]] and isinstance(server.last(b"r0"), Joined)
    assert "session k: rank 0 joined again; 2 datapoints go again" in said


def test_a_server_without_a_factory_or_with_a_pipeline_that_cannot_resume_refuses_saying_why():
    server = Consumers()
    SessionHost(None, server.hooks(), print).on_join(b"c", join("k", 0, 1))
    assert "was given a DataFlow, not a factory" in server.last(b"c").reason
    host = SessionHost(lambda: DataFromList([[1], [2]]), server.hooks(), print)
    host.on_join(b"d", join("k", 0, 1))
    refused = server.last(b"d")
    assert isinstance(refused, Refused) and "pipeline cannot start at the job's position" in refused.reason
    assert not host.active  # it serves consumers outside sessions again
