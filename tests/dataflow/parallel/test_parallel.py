"""MultiProcessRunnerZMQ, MultiProcessMapDataZMQ and MultiThreadMapData with real worker processes."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import psutil
import pytest

from support.procs import wait_for
from towerpack.dataflow import (
    DataFlowWorkerError,
    DataFromGenerator,
    DataFromList,
    FakeData,
    MultiProcessMapDataZMQ,
    MultiProcessRunnerZMQ,
    MultiThreadMapData,
    MultiThreadRunner,
    ShardData,
)
from towerpack.dataflow.parallel.process import START_METHOD_VAR

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(90)]


def ints(n):
    return DataFromList([[np.array(i)] for i in range(n)], shuffle=False)


def values(dps):
    return [int(dp[0]) for dp in dps]


def test_runner_yields_len_datapoints_per_epoch_with_correct_values():
    with MultiProcessRunnerZMQ(ints(20), num_proc=1, hwm=4) as df:
        df.reset_state()
        assert len(df) == 20
        # One worker iterates the input in order, forever: epochs continue the stream.
        assert values(df) == list(range(20))
        assert values(df) == list(range(20))
        assert len(df.worker_pids) == 1


def test_runner_with_several_workers_mixes_their_streams():
    with MultiProcessRunnerZMQ(ints(10), num_proc=3) as df:
        df.reset_state()
        got = [v for _ in range(3) for v in values(df)]
        assert len(got) == 30 and set(got) <= set(range(10))
        assert len(set(df.worker_pids)) == 3


def test_runner_transports_arrays_exactly():
    source = FakeData([[8, 16, 3], [8]], size=5, dtype=["uint8", "int32"], random=False)
    source.reset_state()
    expected = next(iter(source))
    with MultiProcessRunnerZMQ(source, num_proc=2) as df:
        df.reset_state()
        for dp in df:
            np.testing.assert_array_equal(dp[0], expected[0])
            np.testing.assert_array_equal(dp[1], expected[1])
            assert dp[0].dtype == np.uint8 and dp[1].dtype == np.int32


def test_runner_raises_worker_exception_with_traceback():
    def failing():
        yield [np.array(1)]
        raise ValueError("broken record 17")

    with MultiProcessRunnerZMQ(DataFromGenerator(failing), num_proc=1) as df:
        df.reset_state()
        it = iter(df)
        assert int(next(it)[0]) == 1
        with pytest.raises(DataFlowWorkerError) as info:
            next(it)
    text = str(info.value)
    assert "ValueError: broken record 17" in text and "Traceback" in text and "in failing" in text


def test_runner_reports_an_empty_dataflow_instead_of_hanging():
    with MultiProcessRunnerZMQ(DataFromGenerator(lambda: iter([])), num_proc=1) as df:
        df.reset_state()
        with pytest.raises(DataFlowWorkerError, match="no datapoints"):
            next(iter(df))


def test_runner_needs_reset_and_refuses_a_second_reset():
    df = MultiProcessRunnerZMQ(ints(3))
    with pytest.raises(RuntimeError, match="reset_state"):
        next(iter(df))
    df.reset_state()
    try:
        with pytest.raises(RuntimeError, match="already"):
            df.reset_state()
    finally:
        df.close()


def test_killed_worker_is_reported_within_two_seconds():
    df = MultiProcessRunnerZMQ(ints(1000), num_proc=2, hwm=2)
    df.reset_state()
    try:
        it = iter(df)
        for _ in range(10):
            next(it)
        os.kill(df.worker_pids[1], signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(DataFlowWorkerError, match="SIGKILL"):
            for _ in range(100_000):
                next(it)
        assert time.monotonic() - start < 2.0
    finally:
        df.close()
    assert not psutil.Process().children()


def slow_consumer_meets_a_killed_worker(df):
    """Read slowly (so data is always queued), SIGKILL a worker; return seconds until the error."""
    it = iter(df)
    next(it)
    time.sleep(0.5)  # let the queues fill up
    os.kill(df.worker_pids[1], signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(DataFlowWorkerError, match="SIGKILL"):
        while time.monotonic() - start < 5:
            next(it)
            time.sleep(0.005)
    return time.monotonic() - start


def test_killed_worker_is_reported_within_two_seconds_while_data_is_queued():
    with MultiProcessRunnerZMQ(ints(1000), num_proc=2, hwm=50) as df:
        df.reset_state()
        assert slow_consumer_meets_a_killed_worker(df) < 2.0


def test_killed_map_worker_is_reported_within_two_seconds_while_results_are_queued():
    with MultiProcessMapDataZMQ(ints(1000), 2, square, buffer_size=100) as df:
        df.reset_state()
        assert slow_consumer_meets_a_killed_worker(df) < 2.0


def test_forkserver_is_refused_with_the_supported_methods_named():
    for make in (
        lambda: MultiProcessRunnerZMQ(ints(3), start_method="forkserver"),
        lambda: MultiProcessMapDataZMQ(ints(3), 1, square, start_method="forkserver"),
    ):
        with pytest.raises(ValueError, match="'forkserver' is not supported; use one of 'fork', 'spawn'"):
            make()


def test_forkserver_from_the_environment_is_refused(monkeypatch):
    monkeypatch.setenv(START_METHOD_VAR, "forkserver")
    df = MultiProcessRunnerZMQ(ints(3))
    with pytest.raises(ValueError, match=f"{START_METHOD_VAR}='forkserver' is not supported"):
        df.reset_state()
    assert df.worker_pids == []


CONSUMER = textwrap.dedent(
    """
    import signal, numpy as np
    from towerpack.dataflow import DataFromList, MultiProcessRunnerZMQ
    # Like an interactive program, whatever the test runner's own SIGINT disposition is.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    df = MultiProcessRunnerZMQ(DataFromList([[np.arange(100)]] * 50, shuffle=False), num_proc=2, hwm=2)
    df.reset_state()
    print(" ".join(map(str, df.worker_pids)), flush=True)
    while True:
        for dp in df:
            pass
    """
)


def start_consumer():
    proc = subprocess.Popen(
        [sys.executable, "-c", CONSUMER], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    line = proc.stdout.readline()
    if not line.strip():
        proc.kill()
        raise AssertionError(f"consumer failed: {proc.communicate()[1]}")
    workers = [psutil.Process(int(p)) for p in line.split()]
    assert len(workers) == 2 and all(w.is_running() for w in workers)
    return proc, workers


@pytest.mark.slow
def test_workers_die_within_five_seconds_of_consumer_sigkill():
    proc, workers = start_consumer()
    proc.kill()
    proc.wait(10)
    _, alive = psutil.wait_procs(workers, timeout=5)
    assert not alive, f"workers still alive: {alive}"


@pytest.mark.slow
def test_sigint_in_consumer_ends_all_workers():
    proc, workers = start_consumer()
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=15)
    assert "KeyboardInterrupt" in err
    _, alive = psutil.wait_procs(workers, timeout=5)
    assert not alive
    # The workers ignored SIGINT themselves: the parent ended them, so nothing was left to reap.
    assert proc.returncode != 0


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_hundred_runner_cycles_leak_no_fds_or_processes():
    me = psutil.Process()
    source = FakeData([[64]], size=4, random=False)

    def cycle():
        df = MultiProcessRunnerZMQ(source, num_proc=2, hwm=2)
        df.reset_state()
        assert len(list(df)) == 4
        df.close()

    cycle()  # warm up lazily created resources (imports, the libzmq I/O machinery)
    fds, conns = me.num_fds(), len(me.net_connections(kind="unix"))
    for _ in range(100):
        cycle()
    assert me.num_fds() == fds
    assert len(me.net_connections(kind="unix")) == conns
    assert me.children() == []


@pytest.mark.slow
def test_runner_closed_by_garbage_collection_and_at_exit():
    code = textwrap.dedent(
        """
        import numpy as np
        from towerpack.dataflow import DataFromList, MultiProcessRunnerZMQ
        df = MultiProcessRunnerZMQ(DataFromList([[np.arange(3)]] * 5, shuffle=False), num_proc=2)
        df.reset_state()
        print(" ".join(map(str, df.worker_pids)), flush=True)
        next(iter(df))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    pids = [int(p) for p in out.stdout.split()]
    wait_for(
        lambda: not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids),
        5,
        what="workers to exit with their parent",
    )


def square(dp):
    return [dp[0] ** 2]


def test_map_strict_maps_each_datapoint_exactly_once_per_epoch():
    with MultiProcessMapDataZMQ(ints(50), num_proc=3, map_func=square, buffer_size=8, strict=True) as df:
        df.reset_state()
        for _ in range(2):
            got = values(df)
            assert sorted(got) == [i * i for i in range(50)]
        # An abandoned epoch does not leak its in-flight results into the next one.
        it = iter(df)
        next(it)
        it.close()
        assert sorted(values(df)) == [i * i for i in range(50)]


def test_map_strict_rejects_none_and_non_strict_drops_it():
    def odd_none(dp):
        return None if int(dp[0]) % 2 else dp

    with MultiProcessMapDataZMQ(ints(10), 2, odd_none, strict=True) as df:
        df.reset_state()
        with pytest.raises(ValueError, match="None"):
            list(df)
    with MultiProcessMapDataZMQ(ints(10), 2, odd_none, buffer_size=4) as df:
        df.reset_state()
        got = values(df)
        assert len(got) == 10 and all(v % 2 == 0 for v in got)


def test_map_worker_exception_is_raised_with_traceback():
    def explode(dp):
        if int(dp[0]) == 3:
            raise KeyError("datapoint three")
        return dp

    with MultiProcessMapDataZMQ(ints(10), 2, explode, strict=True) as df:
        df.reset_state()
        with pytest.raises(DataFlowWorkerError, match="KeyError: 'datapoint three'"):
            list(df)


def test_multithread_map_keeps_order_and_strictness():
    df = MultiThreadMapData(ints(30), num_thread=4, map_func=square, buffer_size=5)
    df.reset_state()
    try:
        assert values(df) == [i * i for i in range(30)]
        assert values(df) == [i * i for i in range(30)]
    finally:
        df.close()
    strict = MultiThreadMapData(ints(4), 2, lambda dp: None, strict=True)
    strict.reset_state()
    with pytest.raises(ValueError, match="None"):
        list(strict)
    strict.close()


@pytest.mark.parametrize("words", [("hello", 3), ("eoe", 1), ("err", 0), ("hello", None)])
def test_datapoints_that_spell_control_words_arrive_unchanged(words):
    """A worker's own messages are typed, not told apart from datapoints by their text: every
    datapoint of an epoch arrives once, whatever it spells."""
    points = [words, ("x", 1), words, ("y", 2)]
    expected = sorted(map(repr, [list(p) for p in points]))

    def epochs(df):
        return [sorted(repr(list(dp)) for dp in df) for _ in range(2)]

    with MultiProcessRunnerZMQ(ShardData(DataFromList(points, shuffle=False)), 2) as runner:
        runner.reset_state()
        assert epochs(runner) == [expected, expected]
    threads = MultiThreadRunner(lambda: ShardData(DataFromList(points, shuffle=False)), 4, 2)
    try:
        threads.reset_state()
        assert epochs(threads) == [expected, expected]
    finally:
        threads.close()
