"""Exact resume through data servers, in one process: a job's ranks join servers in a session; a new
start of the job, a restarted server, and servers that serve fixed parts of every epoch all go on
with each item once. (End to end under `launch`: tests/resume/test_resume_servers_across_processes.py.)"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from support.procs import free_port, wait_for
from towerpack.dataflow import BatchData, DataServer, IndexedList, Ledger, RemoteDataZMQ
from towerpack.dataflow.resume.keys import as_keys, split_keys
from towerpack.dataflow.resume.position import DataPosition
from towerpack.dataflow.serve.session import ConsumerSession, Session, decode_taken, encode_taken

pytestmark = pytest.mark.timeout(60)

N = 40


def batches(rank: int = 0, world: int = 1) -> Callable[[], Any]:
    """A factory of batches of 4 ids, a server's part ``rank`` of ``world`` of every epoch."""
    return lambda: BatchData(
        IndexedList([[np.int64(i)] for i in range(N)], seed=3, rank=rank, world_size=world), 4
    )


@contextlib.contextmanager
def serving(addr: str, factory: Callable[[], Any] | None, df: Any = None) -> Iterator[list[str]]:
    """A DataServer on ``addr`` in a thread; yields the lines it reports."""
    said: list[str] = []
    server = DataServer(df, addr, hwm=4, factory=factory, report=said.append)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield said
    finally:
        server.stop()
        thread.join(10)


def consumer(
    addrs: str | list[str], rank: int, world: int, start: DataPosition | None, key: tuple
) -> RemoteDataZMQ:
    c = RemoteDataZMQ(addrs, hwm=4, timeout=20)
    c.start_session(start, rank, world)
    c.set_session_key(key)
    c.reset_state()
    return c


def take(c: RemoteDataZMQ, n: int) -> tuple[list[int], np.ndarray]:
    """``n`` datapoints: their ids, and the keys of their tags."""
    it, ids, keys = iter(c), [], []
    for _ in range(n):
        dp = next(it)
        ids += np.ravel(dp[0]).tolist()
        keys.append(as_keys(c.position_tag))
    return ids, np.concatenate(keys)


def epoch_ids(keys: np.ndarray, epoch: int) -> list[int]:
    """The ids of the items of ``epoch`` among ``keys`` (positions of the factory's order)."""
    epochs, positions = split_keys(keys)
    order = IndexedList(list(range(N)), seed=3, rank=0, world_size=1).epoch_order(epoch)
    return sorted(int(order[p]) for p in positions[epochs == epoch])


def test_a_new_start_of_the_job_replaces_the_session_and_continues_its_position():
    addr = f"tcp://127.0.0.1:{free_port()}"
    with serving(addr, batches()) as said:
        first = [consumer(addr, r, 2, None, (1, 2)) for r in range(2)]
        with ThreadPoolExecutor(2) as pool:  # the server waits for both ranks before it serves
            got = list(pool.map(lambda c: take(c, 3), first))
        ledger = Ledger(None, N)
        for _, keys in got:
            ledger.add(keys)
        position = ledger.position()
        assert position.count == 24 and "session 000001000002: 2 ranks joined" in "\n".join(said)
        # The job starts again on one rank from that position: it gets the rest of the epoch.
        second = consumer(addr, 0, 1, position, (3, 4))
        ids, keys = take(second, (N - 24) // 4)
        assert sorted(ids + [i for g in got for i in g[0]]) == list(range(N))
        assert epoch_ids(keys, 1) == sorted(ids)
        with pytest.raises(RuntimeError, match="refused this consumer: superseded by a newer job"):
            take(first[0], 20)  # a consumer of the old session
        for c in [*first, second]:
            c.close()


def take_until(
    c: RemoteDataZMQ, done: Callable[[np.ndarray], bool], before: np.ndarray | None = None, most_s: float = 20
) -> np.ndarray:
    """Datapoints until the keys of their tags (after those ``before``) satisfy ``done``; all the keys.
    A consumer notices a server that restarted after a second without its data, so this takes time."""
    it, keys = iter(c), [np.zeros(0, np.int64) if before is None else before]
    deadline = time.monotonic() + most_s
    while time.monotonic() < deadline:
        next(it)
        keys.append(as_keys(c.position_tag))
        if done(np.concatenate(keys)):
            return np.concatenate(keys)
        time.sleep(0.002)
    raise AssertionError(f"not done after {most_s} s")


def epochs_done(*epochs: int) -> Callable[[np.ndarray], bool]:
    return lambda keys: all(epoch_ids(keys, e) == list(range(N)) for e in epochs)


def test_a_restarted_server_serves_what_its_consumers_had_not_received():
    addr = f"tcp://127.0.0.1:{free_port()}"
    c = consumer(addr, 0, 1, None, (5, 6))
    with serving(addr, batches()):
        before = take(c, 7)[1]
    with serving(addr, batches()) as said:
        keys = take_until(c, epochs_done(1, 2), before)
    assert len(keys) == len(set(keys.tolist())) == 80  # nothing twice, nothing lost
    # It was told of everything taken: the 7 batches, and any the old server had sent that came later.
    pattern = r"1 ranks joined.* from epoch (\d+) \((\d+) of 40 items done"
    joined = [(int(m[1]) - 1) * N + int(m[2]) for line in said if (m := re.search(pattern, line))]
    assert len(joined) == 1 and 28 <= joined[0] <= 44, said
    c.close()


#: A consumer process that joins a session at ADDR and prints the keys of every datapoint it takes.
PRINTING_CONSUMER = """
import sys
from towerpack.dataflow import RemoteDataZMQ
from towerpack.dataflow.resume.keys import as_keys
c = RemoteDataZMQ(sys.argv[1], hwm=4, timeout=30, heartbeat=1.0)
c.start_session(None, 0, 1)
c.set_session_key((4, 4))
c.reset_state()
for dp in c:
    print(" ".join(str(k) for k in as_keys(c.position_tag).tolist()), flush=True)
"""


@pytest.mark.timeout(90)
def test_a_consumer_dropped_by_the_heartbeat_gets_again_what_it_had_not_received():
    addr = f"tcp://127.0.0.1:{free_port()}"
    said: list[str] = []
    server = DataServer(None, addr, hwm=4, factory=batches(), report=said.append, heartbeat=1.0)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    proc = subprocess.Popen(
        [sys.executable, "-c", PRINTING_CONSUMER, addr], stdout=subprocess.PIPE, text=True
    )
    keys: list[int] = []
    try:
        for _ in range(3):
            keys += map(int, proc.stdout.readline().split())
        proc.send_signal(signal.SIGSTOP)  # it hangs: the server's heartbeat drops it, its window in flight
        wait_for(lambda: said[-1] == "consumers connected: 0", 15, what="the server to drop the consumer")
        proc.send_signal(signal.SIGCONT)  # it goes on, joins again, and gets what it had not received
        while not epochs_done(1, 2)(np.array(keys, dtype=np.int64)):
            keys += map(int, proc.stdout.readline().split())
    finally:
        proc.kill()
        proc.wait(10)
        server.stop()
        thread.join(10)
    assert len(keys) == len(set(keys))  # nothing twice; and epochs 1 and 2 whole
    assert len([line for line in said if "ranks joined" in line]) == 1  # the same session throughout
    assert any("rank 0 joined again" in line for line in said), said  # and said what it had


def test_a_rejoin_gets_again_only_what_was_sent_and_not_taken():
    session = Session("k", 1, None)
    sent = [
        ([b"frames %d" % k], keys)
        for k, keys in enumerate([[1 << 40], [(1 << 40) + 1, (1 << 40) + 2], [2 << 40]])
    ]
    session.orphans[b"c"] = list(sent)
    taken = np.array([(1 << 40) + 1, (1 << 40) + 2], np.int64)  # the second datapoint came through
    assert session.orphans_to_serve(b"c", taken, done=1) == [sent[0], sent[2]]
    session.orphans[b"c"] = list(sent)  # epoch 1 is done: nothing of it is served again
    assert session.orphans_to_serve(b"c", np.zeros(0, np.int64), done=2) == [sent[2]]
    assert session.orphans_to_serve(b"c", taken, done=1) == []  # (they are handed out once)


def test_servers_with_fixed_parts_serve_each_item_once_and_one_restarts_alone():
    addrs = [f"tcp://127.0.0.1:{free_port()}" for _ in range(2)]
    c = consumer(addrs, 0, 1, None, (7, 8))
    with serving(addrs[0], batches(0, 2)):
        with serving(addrs[1], batches(1, 2)) as first:
            before = take_until(c, lambda keys: len(split_keys(keys)[1][split_keys(keys)[1] >= N // 2]) >= 8)
        with serving(addrs[1], batches(1, 2)) as said:  # the second server comes back alone
            keys = take_until(c, epochs_done(1, 2), before)
    assert len(keys) == len(set(keys.tolist()))
    assert any("1 ranks joined" in line for line in first) and any("1 ranks joined" in line for line in said)
    c.close()


def test_a_consumer_outside_the_session_and_a_server_without_a_factory_say_why():
    addr = f"tcp://127.0.0.1:{free_port()}"
    with serving(addr, batches()):
        member = consumer(addr, 0, 1, None, (9, 9))
        take(member, 1)
        outsider = RemoteDataZMQ(addr, hwm=4, timeout=20)
        outsider.reset_state()
        with pytest.raises(RuntimeError, match=r"serves a job that resumes exactly .* must join it"):
            take(outsider, 1)
        outsider.close()
        wrong = consumer(addr, 1, 3, None, (9, 9))  # the same job, another world size
        with pytest.raises(RuntimeError, match="the ranks of one job disagree on the world size"):
            take(wrong, 1)
        for c in (member, wrong):
            c.close()
    addr = f"tcp://127.0.0.1:{free_port()}"
    with serving(addr, None, df=batches()()):
        c = consumer(addr, 0, 1, None, (1, 1))
        with pytest.raises(RuntimeError, match="was given a DataFlow, not a factory"):
            take(c, 1)
        c.close()


def test_joins_carry_what_a_consumer_took_as_ranges_and_forget_finished_epochs():
    keys = np.array([5, 6, 7, 10, 3, 3, (2 << 40) + 1, (2 << 40) + 2], dtype=np.int64)
    assert decode_taken(encode_taken(keys)).tolist() == sorted(set(keys.tolist()))
    assert len(encode_taken(np.arange(1000))) == 16  # one range
    with pytest.raises(ValueError, match="not int64 pairs"):
        decode_taken(b"\x01" * 15)
    session = ConsumerSession(DataPosition(1, 10, ((0, 2),)), rank=1, world=2)
    session.set_key((1, 2))
    for k in keys.tolist():
        session.took(k)
    session.set_done_before(2)
    join = session.join_message()
    assert (join.key, join.rank, join.world, join.done) == ("000001000002", 1, 2, 2)
    assert decode_taken(join.taken).tolist() == [(2 << 40) + 1, (2 << 40) + 2]
    assert DataPosition.from_json(join.start) == DataPosition(1, 10, ((0, 2),))
