"""Exact data position: a stopped epoch continues on resume, each item once, at any world size."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from support.id_datasets import IdRecords, Ids
from support.image_datasets import write_mnist
from support.procs import run_python
from towerpack.dataflow.formats.reader import _shuffle_buffer, buffer_emissions
from towerpack.dataflow.parallel.maps import MultiProcessMapDataZMQ
from towerpack.dataflow.parallel.runners import MultiProcessRunnerZMQ, MultiThreadRunner
from towerpack.dataflow.parallel.workers import DataFlowWorkerError
from towerpack.dataflow.pipeline.base import DataFlow
from towerpack.dataflow.pipeline.batch import BatchData
from towerpack.dataflow.pipeline.mapping import MapData
from towerpack.dataflow.pipeline.shard import ShardData
from towerpack.dataflow.pipeline.sharding import Remainder, Shard
from towerpack.dataflow.pipeline.sources import DataFromList, FakeData
from towerpack.dataflow.pipeline.stream import FixedSizeData, LocallyShuffleData
from towerpack.dataflow.resume.position import DataPosition, PositionUnsupportedError
from towerpack.dataflow.resume.replay import round_robin_counts
from towerpack.dataflow.resume.split import Units, leftover_runs, unit_runs
from towerpack.dataflow.resume.tracker import PositionMode, PositionTracker
from towerpack.dataflow.serve.remote import RemoteDataZMQ


@dataclass(frozen=True)
class Layout:
    """How a run of the job is laid out: ranks, workers per rank, batch inside and after the runner
    (``partial``: the batches keep a last partial batch, else they drop it)."""

    world: int
    workers: int
    inner: int
    outer: int
    processes: bool = False
    partial: bool = True

    @property
    def unit(self) -> int:
        """Items one datapoint of a rank takes."""
        return self.inner * self.outer


def rank_pipeline(source: str, n: int, rank: int, layout: Layout, remainder: str) -> DataFlow:
    def make() -> DataFlow:
        order = dict(rank=rank, world_size=layout.world, remainder=remainder)
        if source == "reader":
            src: DataFlow = IdRecords(n, block_size=3, shuffle_buffer=4, **order)
        else:
            src = Ids(n, **order)
        return BatchData(src, layout.inner, remainder=layout.partial)

    if layout.processes:
        runner: DataFlow = MultiProcessRunnerZMQ(make(), layout.workers, hwm=4)
    else:
        runner = MultiThreadRunner(make, 4, layout.workers)
    return BatchData(runner, layout.outer, remainder=layout.partial, use_list=True)


def ids_of(dp: Any) -> list[int]:
    return np.concatenate([np.ravel(x) for x in dp[0]]).tolist()


def run_job(
    source: str,
    n: int,
    layout: Layout,
    start: DataPosition | None,
    count: int | None,
    remainder: str = "uneven",
) -> tuple[list[list[int]], list[DataPosition]]:
    """Every rank reads ``count`` datapoints (the rest of the epoch when None; at most what it has):
    the item ids each rank got, and the position each rank's tracker records."""
    dfs = [rank_pipeline(source, n, r, layout, remainder) for r in range(layout.world)]
    trackers = [PositionTracker.of(df) for df in dfs]
    for t in trackers:
        t.start(start)
    try:
        for df in dfs:
            df.reset_state()
        here = start or DataPosition(1, n)
        if count is None:
            count = trackers[0].remaining(here)
        # Within the epoch, ranks with a smaller share ("uneven") stop at its end; past it, every rank
        # reads on into the next epoch, as a trainer does. The chief's position is the job's.
        within = count <= trackers[0].remaining(here)
        takes = [
            min(count, t.remaining(here)) if within else count * bool(t.datapoints_per_epoch())
            for t in trackers
        ]
        got = []
        for df, take in zip(dfs, takes, strict=True):
            stream = itertools.chain.from_iterable(itertools.repeat(df))
            got.append([i for dp in itertools.islice(stream, take) for i in ids_of(dp)])
        return got, [t.position(take) for t, take in zip(trackers, takes, strict=True)]
    finally:
        for df in dfs:
            df.ds.close()


# -- the position record -------------------------------------------------------------------------


def test_position_json_round_trip_merges_ranges_and_ends_the_epoch():
    pos = DataPosition.of(3, 100, [(10, 20), (0, 5), (5, 8), (19, 30)])
    assert pos == DataPosition(3, 100, ((0, 8), (10, 30)))
    assert pos.count == 28
    assert pos.left() == [(8, 10), (30, 100)]
    assert DataPosition.from_json(pos.to_json()) == pos
    assert pos.to_dict() == {"epoch": 3, "size": 100, "consumed": [[0, 8], [10, 30]]}
    assert DataPosition.of(3, 100, [(0, 60), (60, 100)]) == DataPosition(4, 100)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: DataPosition(0, 10), "epoch must be an int >= 1, got 0"),
        (lambda: DataPosition(1, 10, ((5, 12),)), r"outside \[0, 10\)"),
        (lambda: DataPosition(1, 10, ((5, 8), (1, 2))), "sorted, disjoint"),
        (lambda: DataPosition.from_json('{"epoch": 1, "size": 3}'), "expected the keys"),
        (lambda: DataPosition.from_json('{"epoch": 1, "size": 3, "consumed": [[0, "2"]]}'), "int pairs"),
        (lambda: DataPosition.from_json("{epoch"), "not JSON"),
    ],
)
def test_bad_positions_are_refused_by_name(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_a_position_of_another_dataset_size_names_both_sizes():
    tracker = PositionTracker.of(Ids(50, rank=0, world_size=1))
    with pytest.raises(ValueError, match="a dataset of 40 items, but the dataset Ids has 50 items"):
        tracker.start(DataPosition(2, 40, ((0, 10),)))


# -- the split of what is left, and the round robin -----------------------------------------------


@settings(max_examples=150, deadline=None, database=None)
@given(
    n=st.integers(0, 60),
    world=st.integers(1, 5),
    workers=st.integers(1, 4),
    cuts=st.lists(st.integers(0, 60), max_size=6),
    remainder=st.sampled_from(list(Remainder)),
)
def test_what_is_left_is_split_like_a_whole_epoch(n, world, workers, cuts, remainder):
    bounds = sorted(min(c, n) for c in cuts)
    consumed = DataPosition.of(1, n, zip(bounds[::2], bounds[1::2], strict=False)).consumed
    left = (
        [p for a, b in DataPosition(1, n, consumed).left() for p in range(a, b)]
        if consumed
        else list(range(n))
    )
    pieces = {}
    for r in range(world):
        for w in range(workers):
            shard = Shard(r, world, w, workers)
            runs = leftover_runs(n, consumed, shard, remainder)
            pieces[r, w] = [p for run in runs for p in run]
            if not consumed:
                assert runs == shard.runs(n, remainder)  # a fresh epoch is split as before
            # The same split as a whole epoch of the left-over positions, mapped back to them:
            assert pieces[r, w] == [left[i] for run in shard.runs(len(left), remainder) for i in run]
    delivered = sorted(p for ps in pieces.values() for p in ps)
    if remainder is Remainder.UNEVEN:
        assert delivered == left
    rank_sizes = {sum(len(pieces[r, w]) for w in range(workers)) for r in range(world)}
    if remainder is not Remainder.UNEVEN:
        assert len(rank_sizes) == 1


@settings(max_examples=200, deadline=None, database=None)
@given(
    n=st.integers(0, 80),
    world=st.integers(1, 4),
    workers=st.integers(1, 3),
    worker_unit=st.integers(1, 4),
    outer=st.integers(1, 3),
    remainder=st.sampled_from(list(Remainder)),
)
def test_the_split_in_units_gives_whole_datapoints(n, world, workers, worker_unit, outer, remainder):
    units = Units(worker_unit * outer, worker_unit)
    pieces = {
        (r, w): [p for run in unit_runs(n, Shard(r, world, w, workers), remainder, units) for p in run]
        for r in range(world)
        for w in range(workers)
    }
    ranks = [[p for w in range(workers) for p in pieces[r, w]] for r in range(world)]
    assert [p for rank in ranks for p in rank][: min(n, sum(map(len, ranks)))] == list(
        range(min(n, sum(map(len, ranks))))
    )  # consecutive pieces in order, padding after the end
    if remainder is Remainder.UNEVEN or world == 1:  # one rank: nothing to even out, all is read
        assert sorted(p for rank in ranks for p in rank) == list(range(n))
        whole = [r for r in range(world) if len(ranks[r]) % units.rank == 0]
        assert len(whole) >= world - 1  # one rank at most holds the last partial chunk
        assert [len(ranks[r]) // units.rank for r in range(world)] == sorted(
            (len(rank) // units.rank for rank in ranks), reverse=True
        )
    else:
        assert len({len(rank) for rank in ranks}) == 1
        assert all(len(rank) % units.rank == 0 for rank in ranks)
        assert all(len(ps) % units.worker == 0 for ps in pieces.values())
        if remainder is Remainder.DROP:
            assert n - world * len(ranks[0]) < world * units.rank  # at most W*unit - 1 skipped
        else:
            assert 0 <= world * len(ranks[0]) - n < world * units.rank  # the first items re-used
    if units == Units():
        assert all(
            unit_runs(n, Shard(r, world, w, workers), remainder)
            == Shard(r, world, w, workers).runs(n, remainder)
            for r in range(world)
            for w in range(workers)
        )


@settings(max_examples=150, deadline=None, database=None)
@given(lengths=st.lists(st.integers(0, 8), min_size=1, max_size=5), data=st.data())
def test_round_robin_counts_match_taking_turns(lengths, data):
    count = data.draw(st.integers(0, sum(lengths)))
    left, order = list(lengths), []
    while any(left):
        for i in range(len(left)):
            if left[i]:
                order.append(i)
                left[i] -= 1
    expected = [order[:count].count(i) for i in range(len(lengths))]
    assert round_robin_counts(lengths, count) == expected


@settings(max_examples=100, deadline=None, database=None)
@given(n=st.integers(0, 9000), size=st.integers(1, 50), data=st.data())
def test_the_replayed_shuffle_buffer_yields_what_the_buffer_does(n, size, data):
    count = data.draw(st.integers(0, n))
    items = list(range(n))
    real = list(_shuffle_buffer(iter(items), size, np.random.default_rng((4, n))))
    assert sorted(real) == items
    assert buffer_emissions(items, size, np.random.default_rng((4, n)), count) == real[:count]


# -- stop and resume with real runners -----------------------------------------------------------

layouts = st.builds(
    Layout,
    world=st.integers(1, 3),
    workers=st.integers(1, 3),
    inner=st.integers(1, 4),
    outer=st.integers(1, 3),
)


@pytest.mark.timeout(120)
@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=st.sampled_from(["indexed", "reader"]),
    n=st.integers(1, 40),
    stops=st.lists(st.tuples(layouts, st.floats(0, 1)), min_size=1, max_size=3),
    last=layouts,
)
def test_every_item_of_the_epoch_once_across_stops_at_any_layout(source, n, stops, last):
    # Thread runners: the same round-robin merge as the process runner, cheap enough for many examples.
    position: DataPosition | None = None
    seen: list[int] = []
    epoch = 1
    for layout, fraction in stops:
        chief = PositionTracker.of(rank_pipeline(source, n, 0, layout, "uneven"))
        count = int(fraction * chief.remaining(position or DataPosition(1, n)))
        got, positions = run_job(source, n, layout, position, count)
        position = positions[0]  # the chief's (rank 0 has the largest share with "uneven")
        if position.epoch > epoch:  # this run finished the epoch and went on into the next one(s)
            break
        seen += [i for rank in got for i in rank]
        assert sorted(seen) == sorted(set(seen))
        assert position.count == len(seen)
    else:
        got, positions = run_job(source, n, last, position, None)
        seen += [i for rank in got for i in rank]
        assert positions[0] == DataPosition(2, n)
        assert sorted(seen) == list(range(n))


@pytest.mark.timeout(60)
def test_pad_ranks_agree_on_the_position_and_deliver_every_item():
    n = 23
    got, positions = run_job("indexed", n, Layout(3, 2, 2, 1), None, 2, remainder="pad")
    assert len(set(positions)) == 1
    assert positions[0].count == 12
    rest, after = run_job("indexed", n, Layout(2, 3, 1, 2), positions[0], None, remainder="pad")
    assert set(after) == {DataPosition(2, n)}
    delivered = [i for rank in got + rest for i in rank]
    assert set(delivered) == set(range(n))
    assert len(delivered) <= n + 2 + 1  # padding repeats fewer items than there are ranks, per run


@pytest.mark.timeout(60)
def test_worker_processes_continue_the_epoch_and_the_next_after_a_stop():
    n = 61
    got, positions = run_job("indexed", n, Layout(2, 2, 3, 2, processes=True), None, 4)
    first = [i for rank in got for i in rank]
    assert positions[0] == positions[1] and positions[0].count == len(first) == 48
    # Resume at another world size and worker count, read past the end of the epoch.
    resumed = Layout(1, 3, 2, 1, processes=True)
    tracker = PositionTracker.of(rank_pipeline("indexed", n, 0, resumed, "uneven"))
    left = tracker.remaining(positions[0])
    assert left == 3 + 2 + 2  # 13 items left: 6, 4, 3 per worker (whole batches of 2 but the last)
    got, positions = run_job("indexed", n, resumed, positions[0], left + 4)
    assert sorted(first + got[0][:13]) == list(range(n))
    assert positions[0].epoch == 2 and positions[0].count == 8
    # And the next epoch is continued exactly as well.
    rest, end = run_job("indexed", n, Layout(2, 1, 1, 1, processes=True), positions[0], None)
    assert end[0] == DataPosition(3, n)
    assert sorted(got[0][13:] + rest[0] + rest[1]) == list(range(n))


@pytest.mark.timeout(90)
def test_a_resume_splits_what_is_left_in_whole_batches_of_the_workers():
    # 240 items, 3 ranks x 2 worker processes, batches of 4 inside the workers (a partial one dropped):
    # 20 datapoints per rank. Stop after 7: each rank's workers gave 4 and 3 batches.
    n, layout = 240, Layout(3, 2, 4, 1, processes=True, partial=False)
    got, positions = run_job("indexed", n, layout, None, 7, remainder="drop")
    first = [i for rank in got for i in rank]
    assert len(set(positions)) == 1 and positions[0].count == len(first) == 3 * 7 * 4
    # The same layout reads the 13 datapoints an uninterrupted run has left, every item once.
    trackers = [PositionTracker.of(rank_pipeline("indexed", n, r, layout, "drop")) for r in range(3)]
    assert [t.remaining(positions[0]) for t in trackers] == [13, 13, 13]
    rest, after = run_job("indexed", n, layout, positions[0], None, remainder="drop")
    assert [len(rank) for rank in rest] == [13 * 4] * 3 and set(after) == {DataPosition(2, n)}
    assert sorted(first + [i for rank in rest for i in rank]) == list(range(n))
    # 2 ranks x 2 workers: 156 items left, 19 datapoints per rank, 4 items skipped at the epoch's end.
    smaller = Layout(2, 2, 4, 1, processes=True, partial=False)
    rest, after = run_job("indexed", n, smaller, positions[0], None, remainder="drop")
    assert [len(rank) for rank in rest] == [19 * 4] * 2 and set(after) == {DataPosition(2, n)}
    delivered = first + [i for rank in rest for i in rank]
    assert len(delivered) == len(set(delivered)) == n - 4
    order = Ids(n).epoch_order(1).tolist()
    assert sorted(set(range(n)) - set(delivered)) == sorted(order[-4:])  # the epoch's last items


layouts_dropping = st.builds(
    Layout,
    world=st.integers(1, 3),
    workers=st.integers(1, 3),
    inner=st.integers(1, 4),
    outer=st.integers(1, 3),
    partial=st.just(False),
)


@pytest.mark.timeout(120)
@settings(max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    source=st.sampled_from(["indexed", "reader"]),
    n=st.integers(1, 72),
    stop=layouts_dropping,
    resume=st.one_of(st.none(), layouts_dropping),
    data=st.data(),
)
def test_dropping_loses_at_most_a_unit_per_rank_across_a_stop(source, n, stop, resume, data):
    resume = resume or stop  # None: the same layout
    chief = PositionTracker.of(rank_pipeline(source, n, 0, stop, "drop"))
    per_epoch = chief.datapoints_per_epoch()
    assume(per_epoch >= 2)
    count = data.draw(st.integers(1, per_epoch - 1))  # a stop within the epoch
    got, positions = run_job(source, n, stop, None, count, remainder="drop")
    assert len(set(positions)) == 1 and positions[0].epoch == 1
    rest, after = run_job(source, n, resume, positions[0], None, remainder="drop")
    if rest[0]:  # (with nothing left to read, a rank's position stays where it was)
        assert set(after) == {DataPosition(2, n)}
    for run, layout in ((got, stop), (rest, resume)):
        assert len({len(rank) for rank in run}) == 1  # the same datapoints (of `unit` items) per rank
        assert all(len(rank) % layout.unit == 0 for rank in run)
    delivered = [i for run in (got, rest) for rank in run for i in rank]
    assert len(delivered) == len(set(delivered))
    missing = n - len(delivered)
    assert missing < resume.world * resume.unit
    if resume == stop:
        assert missing == n % (stop.world * stop.unit)  # what the epoch's end drops anyway
        if n % (stop.world * stop.workers * stop.unit) == 0:  # the fresh split gave whole units
            assert len(rest[0]) // stop.unit == per_epoch - count  # what an uninterrupted run has left


def test_the_rest_of_an_epoch_moves_to_the_next_one_also_when_its_fresh_epochs_give_nothing():
    # 3 items left, one batch of 3 for the first of 2 workers; a fresh epoch of 4 gives each worker
    # 2 items, no whole batch (found by the property test above).
    df = rank_pipeline("indexed", 4, 0, Layout(world=1, workers=2, inner=3, outer=1, partial=False), "drop")
    tracker = PositionTracker.of(df)
    start = DataPosition(1, 4, ((0, 1),))
    tracker.start(start)
    assert tracker.remaining(start) == 1
    assert tracker.position(1) == DataPosition(2, 4)
    with pytest.raises(ValueError, match="reads no datapoint per epoch"):
        tracker.position(2)


@pytest.mark.timeout(90)
def test_spawned_workers_continue_the_position(tmp_path):
    # A fresh interpreter, since spawning leaves multiprocessing's resource tracker running.
    write_mnist(str(tmp_path), num_train=40, num_test=0)
    start = DataPosition(2, 40, ((0, 7), (20, 31)))
    code = f"""
import sys
import numpy as np
from towerpack.dataflow.dataset.mnist import Mnist
from towerpack.dataflow.parallel.runners import MultiProcessRunnerZMQ
from towerpack.dataflow.resume.position import DataPosition
from towerpack.dataflow.resume.tracker import PositionMode, PositionTracker
from towerpack.dataflow.serve.remote import RemoteDataZMQ
from towerpack.dataflow.pipeline.shard import ShardData
from towerpack.dataflow.pipeline.sources import DataFromList, FakeData
ds = Mnist("train", dir=sys.argv[1], rank=0, world_size=1, remainder="uneven")
index = {{ds.images[i].tobytes(): i for i in range(40)}}
df = MultiProcessRunnerZMQ(ds, 2, start_method="spawn")
tracker = PositionTracker.of(df)
tracker.start(DataPosition.from_json({start.to_json()!r}))
df.reset_state()
print(tracker.remaining(DataPosition.from_json({start.to_json()!r})))
print(" ".join(str(index[img.tobytes()]) for img, _ in df))
print(" ".join(str(i) for i in ds.epoch_order(2)))
df.close()
"""
    lines = run_python(code, str(tmp_path), timeout=80).stdout.splitlines()
    order = [int(v) for v in lines[2].split()]
    got = [int(v) for v in lines[1].split()]
    assert int(lines[0]) == len(got) == 22
    assert sorted(got) == sorted(order[7:20] + order[31:40])
    # Worker 0 reads the first 11 left-over positions, worker 1 the other 11, taken in turn.
    left = order[7:20] + order[31:40]
    assert got == [v for pair in zip(left[:11], left[11:], strict=True) for v in pair]


# -- what tracking refuses -----------------------------------------------------------------------


def _generator() -> Iterator[list[int]]:
    yield [1]


@pytest.mark.parametrize(
    ("make", "stage"),
    [
        (lambda: BatchData(FixedSizeData(Ids(10), 5), 2), "FixedSizeData"),
        (lambda: MultiProcessRunnerZMQ(MultiProcessRunnerZMQ(Ids(10), 2), 2), "a runner"),
        (
            lambda: BatchData(ShardData(DataFromList([[1]] * 4)), 2),
            r"ShardData is not supported: .* shards itself",
        ),
    ],
)
def test_stages_that_break_the_order_are_named(make, stage):
    with pytest.raises(PositionUnsupportedError, match=f"exact data position: .*{stage}"):
        PositionTracker.of(make())


@pytest.mark.parametrize(
    ("make", "stage"),
    [
        (lambda: LocallyShuffleData(Ids(10), 4), "LocallyShuffleData"),
        (lambda: MultiProcessMapDataZMQ(Ids(10), 2, lambda dp: dp, strict=True), "MultiProcessMapDataZMQ"),
        (
            lambda: BatchData(RemoteDataZMQ("ipc:///nonexistent/position-test"), 2),
            r"RemoteDataZMQ .*`dataflow serve`",
        ),
    ],
)
def test_stages_that_need_tags_are_not_replayed(make, stage):
    tracker = PositionTracker.of(make())  # tracked with tags: tests/resume/test_tags.py
    with pytest.raises(PositionUnsupportedError, match=f"exact data position: {stage}.* cannot be replayed"):
        tracker.start(None, PositionMode.REPLAY)


def test_a_source_of_unknown_order_is_named():
    from towerpack.dataflow.pipeline.sources import DataFromGenerator

    with pytest.raises(PositionUnsupportedError, match="the stage DataFromGenerator is not supported"):
        PositionTracker.of(BatchData(DataFromGenerator(_generator), 1))


@pytest.mark.parametrize(
    ("make", "advice"),
    [
        (
            lambda: DataFromList([[1], [2]]),
            r"DataFromList is not supported: .* Use IndexedList\(lst, shuffle=...\)",
        ),
        (lambda: FakeData([[2]], 4), r"FakeData is not supported: it draws new values .* exact_resume"),
    ],
)
def test_generator_sources_say_how_to_make_them_resumable(make, advice):
    with pytest.raises(PositionUnsupportedError, match=advice):
        PositionTracker.of(BatchData(make(), 1))


def test_an_unsharded_source_in_several_workers_is_refused():
    with pytest.raises(PositionUnsupportedError, match=r"does not shard itself .* each of the 2 workers"):
        PositionTracker.of(MultiProcessRunnerZMQ(Ids(10, shard=False), 2))


@pytest.mark.timeout(60)
def test_a_map_that_drops_datapoints_fails_in_tracking_mode():
    df = MultiProcessRunnerZMQ(
        MapData(Ids(12, rank=0, world_size=1), lambda dp: dp if dp[0] % 5 else None), 2
    )
    PositionTracker.of(df).start(None)
    df.reset_state()
    try:
        with pytest.raises(DataFlowWorkerError, match="yielded 4 datapoints instead of 6: a stage drops"):
            list(df)
    finally:
        df.close()


def test_start_after_reset_state_is_refused():
    df = MultiThreadRunner(lambda: Ids(10, rank=0, world_size=1), 4, 2)
    df.reset_state()
    try:
        with pytest.raises(
            RuntimeError, match=r"start\(\) must come before MultiThreadRunner.reset_state\(\)"
        ):
            PositionTracker.of(df).start(None)
    finally:
        df.close()
