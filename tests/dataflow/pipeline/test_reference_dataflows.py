"""The reference's remaining dataflows, with its documented behaviour (and its bugs fixed where said)."""

import itertools
import logging
import queue

import numpy as np
import pytest

import towerpack.dataflow as tdf
from towerpack.dataflow import (
    BatchDataByShape,
    CacheData,
    DataFromIterable,
    DataFromList,
    DataFromQueue,
    MultiProcessMapAndBatchDataZMQ,
    MultiProcessRunner,
    PrintData,
    RandomChooseData,
    RandomMixData,
    RepeatedData,
    RepeatedDataPoint,
    SelectComponent,
)


def ints(n, start=0):
    return DataFromList([[i] for i in range(start, start + n)], shuffle=False)


def test_print_data_logs_the_first_datapoints_once(caplog):
    df = PrintData(DataFromList([[np.arange(6).reshape(2, 3), "a", {"k": b"xyz"}]] * 3, shuffle=False), num=2)
    df.reset_state()
    with caplog.at_level(logging.INFO, logger="towerpack.dataflow.pipeline.printing"):
        assert len(list(df)) == 3 and len(list(df)) == 3
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 2
    assert "[0]: ndarray int64 shape=[2, 3] range=[0, 5]" in logged[0] and "bytes of length 3" in logged[0]


def test_batch_by_shape_groups_same_shapes_and_keeps_leftovers_across_epochs():
    dps = [[np.zeros((s, 2)), i] for i, s in enumerate([1, 2, 1, 2, 1, 3])]
    df = BatchDataByShape(DataFromList(dps, shuffle=False), 2, idx=0)
    df.reset_state()
    first = list(df)
    assert [b[0].shape for b in first] == [(2, 1, 2), (2, 2, 2)] and first[0][1].tolist() == [0, 2]
    second = list(df)  # datapoint 4 (shape 1) waited from the first epoch
    assert [b[1].tolist() for b in second] == [[4, 0], [1, 3], [2, 4], [5, 5]]


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_batch_by_shape_pass_without_a_batch_is_progress_not_an_empty_dataflow():
    # Three shapes, two per batch: a pass only fills the groups, the next one empties them. An
    # edge-detection pipeline of randomly resized images does this on its first passes.
    dps = [[np.zeros((s, 2)), s] for s in (1, 2, 3)]

    def by_shape(items):
        return BatchDataByShape(DataFromList(items, shuffle=False), 2, idx=0)

    df = by_shape(dps)
    df.reset_state()
    assert [b[1].tolist() for b in itertools.islice(tdf.repeat_forever(df), 3)] == [[1, 1], [2, 2], [3, 3]]
    with tdf.MultiProcessRunnerZMQ(by_shape(dps), 1) as runner:
        runner.reset_state()
        assert not runner.exact  # its epochs mix passes: the runner counts len datapoints
        assert [b[1].tolist() for _ in range(3) for b in runner] == [[1, 1], [2, 2], [3, 3]]
    empty = by_shape([])
    empty.reset_state()
    with pytest.raises(RuntimeError, match="produced no datapoints"):
        next(tdf.repeat_forever(empty))


def test_repeated_datapoint_select_component_and_cache():
    assert (
        list(RepeatedDataPoint(ints(2), 3)) == [[0]] * 3 + [[1]] * 3
        and len(RepeatedDataPoint(ints(2), 3)) == 6
    )
    sel = SelectComponent(DataFromList([[1, 2, 3]], shuffle=False), [2, 0])
    assert list(sel) == [[3, 1]]
    calls = []
    src = DataFromList([[i] for i in range(5)], shuffle=False)
    counted = tdf.MapData(src, lambda dp: calls.append(dp) or dp)
    cache = CacheData(counted, shuffle=True)
    cache.reset_state()
    first = list(cache)
    again = [list(cache) for _ in range(3)]
    assert len(calls) == 5 and all(sorted(e) == first for e in again) and any(e != first for e in again)


def test_random_choose_and_mix():
    chooser = RandomChooseData([(ints(100), 0.5), (ints(100, 1000), 0.5)])
    chooser.seed = 3
    chooser.reset_state()
    got = [dp[0] for dp in chooser]
    # It stops at the first pick of an input that has ended: after 100 to 200 datapoints.
    assert 100 <= len(got) <= 200 and any(v >= 1000 for v in got) and any(v < 1000 for v in got)
    with pytest.raises(ValueError, match=r"sum to 0\.9"):
        RandomChooseData([(ints(3), 0.5), (ints(3), 0.4)])
    mix = RandomMixData([ints(20), ints(30, 100)])
    mix.reset_state()
    got = [dp[0] for dp in mix]
    assert len(mix) == 50 and sorted(got) == list(range(20)) + list(range(100, 130))
    assert [v for v in got if v < 100] == list(range(20)) and got != sorted(got)  # each source in order


def test_data_from_queue_and_iterable():
    q = queue.Queue()
    for i in range(3):
        q.put([i])
    it = iter(DataFromQueue(q))
    assert [next(it) for _ in range(3)] == [[0], [1], [2]]
    df = DataFromIterable([[1], [2]])
    assert len(df) == 2 and list(df) == list(df) == [[1], [2]]
    once = DataFromIterable(iter([[1], [2]]))
    assert list(once) == [[1], [2]]
    with pytest.raises(RuntimeError, match="one-shot iterator"):
        list(once)
    with pytest.raises(NotImplementedError, match="no length"):
        len(once)


def test_old_names_are_the_same_classes():
    assert tdf.PrefetchData is tdf.MultiProcessPrefetchData is tdf.MultiProcessRunner
    assert tdf.PrefetchDataZMQ is tdf.MultiProcessRunnerZMQ
    assert tdf.MultiThreadPrefetchData is tdf.MultiThreadRunner
    assert tdf.MultiProcessMapData is tdf.MultiProcessMapDataZMQ
    assert tdf.MultiProcessMapAndBatchData is tdf.MultiProcessMapAndBatchDataZMQ
    assert tdf.ThreadedMapData is tdf.MultiThreadMapData


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_multiprocess_runner_and_map_and_batch_in_real_processes():
    with MultiProcessRunner(ints(10), num_prefetch=4, num_proc=1) as df:
        df.reset_state()
        assert [dp[0] for dp in df] == list(range(10))
    source = RepeatedData(DataFromList([[np.float32(i)] for i in range(12)], shuffle=False), 1)
    with MultiProcessMapAndBatchDataZMQ(
        source, 2, lambda dp: None if dp[0] % 3 == 0 else [dp[0] * 2], batch_size=4
    ) as df:
        df.reset_state()
        with pytest.raises(NotImplementedError):
            len(df)
        it = iter(df)
        batches = [next(it)[0] for _ in range(6)]
    assert all(b.shape == (4,) and b.dtype == np.float32 for b in batches)
    values = np.concatenate(batches)
    assert set(values.tolist()) <= {2.0 * i for i in range(12) if i % 3} and 0.0 not in values
    with pytest.raises(ValueError, match=r"batch_size .4. < buffer_size .4."):
        MultiProcessMapAndBatchDataZMQ(source, 1, lambda dp: dp, batch_size=4, buffer_size=4)


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_map_and_batch_reports_a_dispatcher_error_with_its_traceback():
    def broken():
        yield [1]
        raise OSError("disk gone")

    with MultiProcessMapAndBatchDataZMQ(tdf.DataFromGenerator(broken), 1, lambda dp: dp, batch_size=2) as df:
        df.reset_state()
        with pytest.raises(tdf.DataFlowWorkerError, match=r"(?s)worker 0.*OSError: disk gone"):
            next(iter(df))
