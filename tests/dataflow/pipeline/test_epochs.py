"""Exactly-once epochs: every sample id counted across workers, ranks and servers, with real processes."""

import collections
import threading

import numpy as np
import pytest

from support.dataflow_server import ServerProcess
from support.procs import free_port
from towerpack.dataflow import (
    DataFromList,
    LMDBSerializer,
    MultiProcessRunnerZMQ,
    MultiThreadRunner,
    RemoteDataZMQ,
    ShardData,
)

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(120)]

N = 90


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "ids.lmdb"
    LMDBSerializer.save(
        DataFromList([[np.int64(i), np.zeros(8, "float32")] for i in range(N)], shuffle=False), path
    )
    return path


def assert_each_once(epoch_ids):
    counts = collections.Counter(epoch_ids)
    assert sorted(counts) == list(range(N)), f"missing {sorted(set(range(N)) - set(counts))}"
    assert max(counts.values()) == 1, f"repeated {[i for i, c in counts.items() if c > 1]}"


def test_two_ranks_of_three_worker_processes_read_each_record_once_per_epoch(dataset):
    runners = [
        MultiProcessRunnerZMQ(
            LMDBSerializer.load(dataset, rank=r, world_size=2, remainder="uneven", block_size=4), 3, hwm=4
        )
        for r in range(2)
    ]
    try:
        for r in runners:
            r.reset_state()
        epochs = [[[int(dp[0]) for dp in r] for r in runners] for _ in range(3)]
        assert all(r.exact for r in runners)
    finally:
        for r in runners:
            r.close()
    for parts in epochs:
        assert [len(p) for p in parts] == [45, 45]
        assert_each_once(parts[0] + parts[1])
    assert epochs[0][0] != epochs[1][0]  # a new order every epoch


def test_shard_data_of_a_shuffled_list_in_worker_processes_and_threads():
    def shuffled(rank):
        return ShardData(DataFromList(list(range(N)), shuffle=True), rank, 3, remainder="uneven")

    runners = [MultiProcessRunnerZMQ(shuffled(r), 2, hwm=4) for r in range(3)]
    try:
        for r in runners:
            r.reset_state()
        for _ in range(2):
            assert_each_once([x for r in runners for x in r])
    finally:
        for r in runners:
            r.close()
    threads = [MultiThreadRunner(lambda r=r: shuffled(r), num_prefetch=4, num_thread=2) for r in range(3)]
    try:
        for t in threads:
            t.reset_state()
        for _ in range(2):
            assert_each_once([x for t in threads for x in t])
    finally:
        for t in threads:
            t.close()


def test_an_iteration_that_stops_at_the_epochs_length_leaves_the_next_epoch_whole():
    """A consumer that reads exactly ``len(df)`` datapoints (as an inference runner does) and
    stops before the end-of-epoch marks gets a whole epoch from its next iteration; one that
    stops in the middle of an epoch gets the next epoch, not the rest of the old one."""

    def check(runner):
        runner.reset_state()
        for _ in range(3):
            it = iter(runner)
            assert_each_once([next(it) for _ in range(N)])
            del it
        it = iter(runner)
        next(it)
        del it
        epoch = list(runner)
        assert_each_once(epoch)

    with MultiProcessRunnerZMQ(ShardData(DataFromList(list(range(N)), shuffle=True)), 2, hwm=4) as runner:
        check(runner)
    threads = MultiThreadRunner(lambda: ShardData(DataFromList(list(range(N)), shuffle=True)), 4, 2)
    try:
        check(threads)
    finally:
        threads.close()


def read_epochs(consumers, epochs):
    """Read every consumer in a thread of its own until every server has ended ``epochs`` epochs.

    Returns the ids received by epoch number (from the servers' marks), for each consumer. Every
    consumer is read all the time: one that stopped reading would hold its server's epoch back
    (its unacknowledged datapoints delay the mark). So a consumer that is done keeps reading
    (and acknowledging) until all are; then a consumer that waits for a later mark times out.
    A consumer that registered late counts its first datapoints in the epoch its mark closes.
    """
    out = [collections.defaultdict(list) for _ in consumers]
    errors = []
    everyone = [c for group in consumers for c in group]

    def done():
        return all(c.epoch >= epochs for c in everyone)

    def run(c, got):
        try:
            while not (c.epoch >= epochs and done()):
                try:
                    ids = [int(dp[0]) for dp in c]  # one iteration ends at an end-of-epoch mark
                except TimeoutError:
                    if done():
                        return
                    continue
                got[c.epoch] += ids
        except Exception as exc:  # reported by the test thread
            errors.append(exc)

    threads = [
        threading.Thread(target=run, args=(c, out[k])) for k, group in enumerate(consumers) for c in group
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not errors, errors
    return out


def test_one_server_with_two_workers_marks_epochs_for_three_consumers():
    addr = f"tcp://127.0.0.1:{free_port()}"
    with ServerProcess(
        "support.dataflow_factories:shuffled_ids", "--bind", addr, "--workers", "2", "--epochs"
    ) as s:
        s.wait_for_line("consumers connected: 0")
        consumers = [[RemoteDataZMQ(addr, hwm=4, timeout=3)] for _ in range(3)]
        for (c,) in consumers:
            c.reset_state()
        try:
            out = read_epochs(consumers, 2)
        finally:
            for (c,) in consumers:
                c.close()
    for e in (1, 2):
        assert_each_once([i for k in range(3) for i in out[k][e]])
    assert all(c.epoch >= 2 for (c,) in consumers)


def test_two_sharded_servers_with_two_workers_each_serve_every_record_once(dataset, monkeypatch):
    monkeypatch.setenv("DATAFLOW_TEST_DATASET", str(dataset))
    addrs = [f"tcp://127.0.0.1:{free_port()}" for _ in range(2)]
    servers = [
        ServerProcess(
            "support.dataflow_factories:dataset",
            "--bind",
            a,
            "--workers",
            "2",
            "--epochs",
            "--shard",
            f"{i}/2",
        )
        for i, a in enumerate(addrs)
    ]
    try:
        for s in servers:
            s.wait_for_line("consumers connected: 0")
        # Two consumers, each reading both servers.
        consumers = [[RemoteDataZMQ(a, hwm=4, timeout=3) for a in addrs] for _ in range(2)]
        for pair in consumers:
            for c in pair:
                c.reset_state()
        try:
            out = read_epochs(consumers, 2)
        finally:
            for pair in consumers:
                for c in pair:
                    c.close()
    finally:
        for s in servers:
            s.stop()
    for e in (1, 2):
        assert_each_once([i for k in range(2) for i in out[k][e]])
