"""Runners never wait silently: too-small worker shares raise at start, long waits log a warning."""

import logging
import re
import time

import numpy as np
import psutil
import pytest

from towerpack.dataflow import (
    BatchData,
    DataFromGenerator,
    DataFromList,
    MultiProcessMapDataZMQ,
    MultiProcessRunner,
    MultiProcessRunnerZMQ,
    MultiThreadMapData,
    MultiThreadRunner,
    ShardData,
)
from towerpack.dataflow.parallel.stall import STALL_WARNING_VAR

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(60)]


def ids(n):
    return ShardData(DataFromList([[np.int64(i)] for i in range(n)], shuffle=False))


def stall_warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "towerpack.dataflow.parallel.stall"]


@pytest.mark.parametrize(
    "make",
    [
        lambda: MultiProcessRunnerZMQ(BatchData(ids(6), 4), num_proc=2),
        lambda: MultiProcessRunner(BatchData(ids(6), 4), num_prefetch=4, num_proc=2),
        lambda: MultiThreadRunner(lambda: BatchData(ids(6), 4), num_prefetch=4, num_thread=2),
    ],
    ids=["MultiProcessRunnerZMQ", "MultiProcessRunner", "MultiThreadRunner"],
)
def test_workers_whose_share_is_smaller_than_the_batch_raise_at_start(make):
    runner = make()
    name = type(runner).__name__
    runner.reset_state()
    try:
        start = time.monotonic()
        with pytest.raises(ValueError) as info:
            next(iter(runner))
        assert time.monotonic() - start < 10
        text = str(info.value)
        assert text.startswith(f"{name}: no worker can make a batch")
        assert "6 datapoints per epoch" in text and "BatchData(batch_size=4, remainder=False)" in text
        assert "among 2 workers that is 3 datapoints per worker" in text and "rank 0 of 1" in text
        assert "fewer workers (at most 1)" in text and "a batch size of at most 3" in text
        assert "remainder=True" in text and "outside (after) the runner" in text
        with pytest.raises(ValueError, match="no worker can make a batch"):  # again, not a hang
            next(iter(runner))
    finally:
        runner.close()
    assert not psutil.Process().children()


def test_shares_that_hold_a_batch_each_run_exact_epochs():
    with MultiProcessRunnerZMQ(BatchData(ids(8), 4), num_proc=2) as runner:
        runner.reset_state()
        epoch = [int(i) for batch in runner for i in batch[0]]
        assert runner.exact and sorted(epoch) == list(range(8))


def test_a_stalled_worker_is_reported_at_growing_intervals_naming_the_runner(caplog):
    def stalls():
        yield [np.int64(0)]
        time.sleep(1.6)  # a worker stuck on a slow read
        yield [np.int64(1)]

    caplog.set_level(logging.WARNING, logger="towerpack.dataflow.parallel.stall")
    with MultiProcessRunnerZMQ(DataFromGenerator(stalls), num_proc=1, stall_warning=0.3) as runner:
        runner.reset_state()
        it = iter(runner)
        assert int(next(it)[0]) == 0
        caplog.clear()  # (a slow start on a busy machine may already have warned)
        assert int(next(it)[0]) == 1  # after the stall
        pid = runner.worker_pids[0]
    warnings = stall_warnings(caplog)
    assert len(warnings) >= 2, warnings
    for w in warnings:
        assert w.startswith("MultiProcessRunnerZMQ has waited ")
        assert f"from its 1 worker process (pid {pid}), all alive" in w
        assert STALL_WARNING_VAR in w
    waited = [float(re.search(r"has waited ([0-9.]+) s", w).group(1)) for w in warnings]
    due = [float(re.search(r"Next warning after ([0-9.]+) s", w).group(1)) for w in warnings]
    assert waited[0] >= 0.3 and due[0] >= 0.6, warnings
    for k in range(1, len(warnings)):  # each one when the wait has (at least) doubled
        assert waited[k] >= due[k - 1] - 0.05 and due[k] >= 2 * due[k - 1] - 0.1, warnings


def test_the_consumers_own_time_between_datapoints_is_no_wait(caplog):
    caplog.set_level(logging.WARNING, logger="towerpack.dataflow.parallel.stall")
    with MultiProcessRunnerZMQ(DataFromList([[1], [2]], shuffle=False), 1, stall_warning=0.3) as runner:
        runner.reset_state()
        assert runner.exact  # each epoch ends with the worker's end-of-pass message
        caplog.clear()  # (a slow start on a busy machine may have warned)
        for _ in range(2):
            for _dp in runner:
                time.sleep(0.4)  # a long training step; the end-of-pass mark is queued meanwhile
    assert not stall_warnings(caplog)


def _slow_results(seconds):
    deadline = time.time() + seconds  # read in the workers too: they are forked with it

    def none_until_deadline(dp):
        return None if time.time() < deadline else dp

    return none_until_deadline


def _sleeper(seconds):
    def gen():
        time.sleep(seconds)
        yield [np.int64(7)]

    return gen


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (  # busy: results keep coming, none of them a datapoint
            lambda: MultiProcessMapDataZMQ(DataFromList([[1]] * 4, shuffle=False), 1, _slow_results(1.0)),
            r"MultiProcessMapDataZMQ has waited .* from its 1 worker process \(pid \d+\), all alive; "
            r"it received only control messages meanwhile \(\d+ NoResult\)",
        ),
        (
            lambda: MultiThreadRunner(lambda: DataFromGenerator(_sleeper(1.0)), num_prefetch=2, num_thread=1),
            r"MultiThreadRunner has waited .* from its 1 thread, all alive",
        ),
        (
            lambda: MultiThreadMapData(
                DataFromList([[1]] * 2, shuffle=False), 2, lambda dp: time.sleep(1.0) or dp
            ),
            r"MultiThreadMapData has waited .* from its 2 threads "
            r"\(2 map_func calls pending, 2 of them running",
        ),
    ],
    ids=["process-map-of-nothing", "thread-runner", "thread-map"],
)
def test_every_parallel_dataflow_warns_while_it_waits(make, expected, caplog, monkeypatch):
    monkeypatch.setenv(STALL_WARNING_VAR, "0.3")  # the environment sets the threshold too
    caplog.set_level(logging.WARNING, logger="towerpack.dataflow.parallel.stall")
    df = make()
    df.reset_state()
    try:
        next(iter(df))
    finally:
        df.close()
    warnings = stall_warnings(caplog)
    assert warnings and re.search(expected, warnings[0]), warnings


def test_the_threshold_is_checked():
    with pytest.raises(ValueError, match="stall_warning must be a positive number of seconds"):
        MultiProcessRunnerZMQ(DataFromList([[1]]), stall_warning=0)
    with pytest.raises(ValueError, match="MultiThreadMapData: stall_warning must be a number"):
        MultiThreadMapData(DataFromList([[1]]), 1, lambda dp: dp, stall_warning="soon")
