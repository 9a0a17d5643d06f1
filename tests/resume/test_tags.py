"""Exact data position in tag mode: items carry their positions through every stage (threads, worker
processes, parallel maps, shuffle buffers), a rank's position is the set of items it trained on, and
what is left of an epoch is split among any layout: each item trained once across stops."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import id_datasets
from towerpack.dataflow import (
    BatchData,
    BatchDataByShape,
    LocallyShuffleData,
    MapData,
    MultiProcessMapAndBatchDataZMQ,
    MultiProcessMapDataZMQ,
    MultiProcessRunnerZMQ,
    MultiThreadMapData,
    MultiThreadRunner,
)
from towerpack.dataflow.pipeline.sharding import Remainder, Shard
from towerpack.dataflow.resume.keys import KEY_SHIFT, keys_of, split_keys
from towerpack.dataflow.resume.ledger import Ledger
from towerpack.dataflow.resume.position import DataPosition
from towerpack.dataflow.resume.ranges import runs_of
from towerpack.dataflow.resume.split import Units, dropped_positions, fixed_runs, leftover_runs
from towerpack.dataflow.resume.tags import pack_keys, unpack_keys
from towerpack.dataflow.resume.tracker import PositionMode, PositionTracker

#: Datapoints are ``[id, data epoch]``.
Ids = functools.partial(id_datasets.Ids, with_epoch=True)
IdRecords = functools.partial(id_datasets.IdRecords, with_epoch=True)


def items_of(dp: Any) -> list[tuple[int, int]]:
    """``(data epoch, id)`` of the items a datapoint holds."""
    ids, epochs = dp[0], dp[1]
    if isinstance(ids, list):  # batches of batches (use_list)
        ids, epochs = (
            np.concatenate([np.ravel(x) for x in ids]),
            np.concatenate([np.ravel(x) for x in epochs]),
        )
    return list(zip(np.ravel(epochs).tolist(), np.ravel(ids).tolist(), strict=True))


def tagged_items(source: Any, tag: Any) -> set[tuple[int, int]]:
    """``(epoch, id)`` of the items a tag's keys name (positions of their epochs' orders)."""
    epochs, positions = split_keys(np.atleast_1d(np.asarray(tag, dtype=np.int64)))
    out = set()
    for e, p in zip(epochs.tolist(), positions.tolist(), strict=True):
        if isinstance(source, id_datasets.IdRecords):  # blocks of records in an order drawn per epoch
            starts = np.arange(0, source.n, source.block_size)
            starts = np.random.default_rng((source.seed, e)).permutation(starts)
            order = [i for s in starts.tolist() for i in range(s, min(s + source.block_size, source.n))]
            out.add((e, order[p]))
        else:
            out.add((e, int(source.epoch_order(e)[p])))
    return out


def run_job(make: Callable[[int, int], Any], world: int, start: DataPosition | None, count: int, n: int):
    """Every rank of ``world`` reads ``count`` datapoints of ``make(rank, world)`` in tag mode, after
    ``start``. Returns each rank's datapoints with their tags, and the job's position (a Ledger of the
    ranks' trained keys)."""
    dfs = [make(r, world) for r in range(world)]
    trackers = [PositionTracker.of(df) for df in dfs]
    for t in trackers:
        t.start(start, PositionMode.TAGS)
    ledger = Ledger(start, n)
    out = []
    try:
        for df in dfs:
            df.reset_state()
        for df, t in zip(dfs, trackers, strict=True):
            got = [(dp, df.position_tag) for dp in itertools.islice(t.iterate(), count)]
            ledger.add(t.trained_keys(len(got)))
            out.append(got)
    finally:
        for df in dfs:
            for d in (df, getattr(df, "ds", None)):
                if hasattr(d, "close"):
                    d.close()
    return out, ledger.position()


# -- positions, ledgers, and the exchange's rows ----------------------------------------------------


def test_positions_with_later_epochs_round_trip_and_old_records_load():
    pos = DataPosition.of_epochs(10, {3: ((0, 10),), 4: ((2, 5),), 5: ((0, 1), (1, 3))}, 3)
    assert pos == DataPosition(4, 10, ((2, 5),), ((5, ((0, 3),)),))
    assert DataPosition.from_json(pos.to_json()) == pos
    assert pos.consumed_in(3) == ((0, 10),) and pos.consumed_in(5) == ((0, 3),) and pos.consumed_in(6) == ()
    old = '{"epoch": 2, "size": 10, "consumed": [[0, 4]]}'  # written before epochs could overlap
    assert DataPosition.from_json(old) == DataPosition(2, 10, ((0, 4),))
    assert "later" not in DataPosition(2, 10, ((0, 4),)).to_dict()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: DataPosition(3, 10, (), ((3, ((0, 1),)),)), "later epochs must be increasing ints after 3"),
        (lambda: DataPosition(3, 10, (), ((4, ()),)), "later epoch 4 has no consumed ranges"),
        (lambda: DataPosition(3, 10, (), ((4, ((5, 12),)),)), r"epoch 4's ranges .* outside \[0, 10\)"),
        (lambda: DataPosition.from_json('{"epoch": 1, "size": 3, "consumed": [], "later": [1]}'), "'later'"),
    ],
)
def test_bad_later_epochs_are_refused_by_name(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_the_ledger_adds_up_ranks_and_lets_finished_epochs_go():
    ledger = Ledger(DataPosition(2, 6, ((0, 2),), ((3, ((5, 6),)),)))
    ledger.add(keys_of(2, np.array([2, 3])))  # one rank
    ledger.add(np.concatenate([keys_of(2, np.array([4])), keys_of(3, np.array([0])), keys_of(1, [1])]))
    assert ledger.position() == DataPosition(2, 6, ((0, 5),), ((3, ((0, 1), (5, 6))),))
    ledger.add(keys_of(2, np.array([5, 5])))  # a duplicate (padding) counts once
    assert ledger.position() == DataPosition(3, 6, ((0, 1), (5, 6)))
    assert ledger.first == 3
    with pytest.raises(ValueError, match="position 6, outside the dataset of 6 items"):
        ledger.add(keys_of(3, np.array([6])))


def _keys(runs: list[tuple[int, int, int]]) -> np.ndarray:
    """The keys of runs ``(epoch, first position, length)``."""
    return np.array(
        [(e << KEY_SHIFT) | p for e, first, n in runs for p in range(first, first + n)], dtype=np.int64
    ).reshape(-1)


_runs = st.lists(
    st.tuples(st.integers(0, 2**22), st.integers(0, 2**KEY_SHIFT - 70), st.integers(1, 65)), max_size=12
)


@settings(max_examples=200, deadline=None, database=None)
@given(ranks=st.lists(_runs, min_size=1, max_size=4), capacity=st.integers(1, 40), data=st.data())
def test_keys_travel_exactly_in_fixed_int64_rows_runs_in_two_entries(ranks, capacity, data):
    # Each rank packs its keys (shuffled, with duplicates) into a row of the same size; the gathered rows
    # give back exactly the distinct keys that fit, the smallest first, and the rest stays behind.
    rows, sent = [], []
    for runs in ranks:
        keys = _keys(runs)
        mixed = np.array(data.draw(st.permutations(np.concatenate([keys, keys[:3]]).tolist())), np.int64)
        row, rest = pack_keys(mixed, capacity)
        assert row.dtype == np.int64 and row.shape == (1 + capacity,)
        distinct = np.unique(keys)
        mine = unpack_keys(row)
        assert mine.tolist() == distinct[: len(mine)].tolist()
        assert rest.tolist() == distinct[len(mine) :].tolist()
        if 2 * len(runs_of(distinct)[0]) <= capacity:  # every run fits in two entries, whatever its length
            assert not len(rest)
        assert len(mine) >= min(capacity, len(distinct))  # never fewer keys than entries
        rows.append(row)
        sent.append(mine)
    assert unpack_keys(np.stack(rows)).tolist() == np.concatenate(sent).tolist()


def test_bad_rows_and_keys_are_refused_by_name():
    with pytest.raises(ValueError, match="keys are >= 0, got -3"):
        pack_keys(np.array([4, -3]), 8)
    with pytest.raises(ValueError, match="capacity must be >= 1, got 0"):
        pack_keys(np.array([4]), 0)
    with pytest.raises(ValueError, match=r"counts \[5\] entries in 2"):
        unpack_keys(np.array([5, 1, 2]))
    with pytest.raises(ValueError, match="a run length that follows no key"):
        unpack_keys(np.array([3, 4, -1, -1]))


# -- the splits: servers' fixed parts, and what "drop" leaves out --------------------------------------


def _consumed(n: int, cuts: list[int]) -> tuple:
    bounds = sorted(min(c, n) for c in cuts)
    return DataPosition.of(1, n, zip(bounds[::2], bounds[1::2], strict=False)).consumed


@settings(max_examples=150, deadline=None, database=None)
@given(
    n=st.integers(0, 60),
    servers=st.integers(1, 4),
    workers=st.integers(1, 3),
    unit=st.integers(1, 4),
    cuts=st.lists(st.integers(0, 60), max_size=8),
    remainder=st.sampled_from(list(Remainder)),
)
def test_fixed_parts_of_servers_split_what_is_left_of_them(n, servers, workers, unit, cuts, remainder):
    consumed = _consumed(n, cuts)
    free = {p for p in range(n) if not any(a <= p < b for a, b in consumed)}
    everything = []
    for s in range(servers):
        parts = [
            fixed_runs(n, consumed, Shard(s, servers, w, workers), remainder, Units(unit, unit))
            for w in range(workers)
        ]
        got = [p for runs in parts for r in runs for p in r]
        own = [p for r in Shard(s, servers).runs(n, remainder) for p in r]
        # A server's workers split its own part of the whole epoch less what is consumed, whatever the
        # other servers do, each worker whole units but the last.
        assert sorted(got) == sorted(p for p in own if p in free)
        assert all(sum(len(r) for r in runs) % unit == 0 for runs in parts[:-1] if parts[-1])
        everything += got
    if remainder is Remainder.UNEVEN:
        assert sorted(everything) == sorted(free)


@settings(max_examples=150, deadline=None, database=None)
@given(
    n=st.integers(1, 80),
    world=st.integers(1, 4),
    unit=st.integers(1, 4),
    cuts=st.lists(st.integers(0, 80), max_size=6),
)
def test_the_dropped_tail_is_what_no_rank_reads(n, world, unit, cuts):
    consumed = _consumed(n, cuts)
    if consumed == ((0, n),):
        return
    shards = [Shard(r, world) for r in range(world)]
    read = {
        p for s in shards for run in leftover_runs(n, consumed, s, Remainder.DROP, Units(unit)) for p in run
    }
    free = {p for p in range(n) if not any(a <= p < b for a, b in consumed)}
    assert set(dropped_positions(n, consumed, world, unit).tolist()) == free - read


# -- stop and resume in tag mode ----------------------------------------------------------------------

N = 36


def _threads(source: str) -> Callable[..., Any]:
    def make(rank: int, world: int, workers: int, inner: int, outer: int) -> Any:
        def one() -> Any:
            order = dict(rank=rank, world_size=world, remainder="uneven")
            src = (
                IdRecords(N, block_size=5, shuffle_buffer=4, **order)
                if source == "reader"
                else Ids(N, **order)
            )
            return BatchData(src, inner, remainder=True)

        return BatchData(MultiThreadRunner(one, 4, workers), outer, remainder=True, use_list=True)

    return make


def _mixing(rank: int, world: int, workers: int, inner: int, outer: int) -> Any:
    df = Ids(N, rank=rank, world_size=world, remainder="uneven")
    df = LocallyShuffleData(df, 5)  # endless: epochs mix
    df = MultiThreadMapData(df, workers, lambda dp: dp if dp[0] % 11 else None, buffer_size=3)  # drops 3 ids
    return BatchData(df, inner * outer)


def _by_shape(rank: int, world: int, workers: int, inner: int, outer: int) -> Any:
    df = Ids(N, rank=rank, world_size=world, remainder="uneven")
    df = MapData(df, lambda dp: [dp[0], dp[1], np.zeros(int(dp[0]) % 2)])
    return BatchDataByShape(df, inner, 2)


PIPELINES = {
    "threads": _threads("indexed"),
    "reader": _threads("reader"),
    "mixing": _mixing,
    "by_shape": _by_shape,
}
SOURCES = {"reader": IdRecords(N, block_size=5, shuffle_buffer=4)}
layouts = st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(1, 2))


def check_jobs(kind: str, stops: list, final_count: int) -> None:
    """Run ``stops`` then one rank to ``final_count`` datapoints: no item twice in an epoch, tags hold
    the items, and epoch 1 trained every item but those the pipeline drops."""
    pipeline, source = PIPELINES[kind], SOURCES.get(kind, Ids(N))
    position, trained = None, []
    for (world, workers, inner, outer), count in [*stops, ((1, 2, 2, 1), final_count)]:
        out, position = run_job(
            lambda r, w, k=workers, i=inner, o=outer: pipeline(r, w, k, i, o), world, position, count, N
        )
        for rank in out:
            for dp, tag in rank:
                items = items_of(dp)
                assert set(items) <= tagged_items(source, tag)
                trained += items
    twice = [t for t in set(trained) if trained.count(t) > 1]
    assert not twice, f"trained twice in an epoch: {sorted(twice)}"
    dropped = {i for i in range(N) if i % 11 == 0} if kind == "mixing" else set()
    assert sorted(i for e, i in trained if e == 1) == sorted(set(range(N)) - dropped)
    assert position.epoch >= 2


@pytest.mark.timeout(180)
@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(sorted(PIPELINES)), stops=st.lists(st.tuples(layouts, st.integers(0, 5)), max_size=3)
)
def test_each_item_once_across_stops_at_any_layout(kind, stops):
    check_jobs(kind, stops, final_count=3 * N)


@pytest.mark.timeout(120)
@pytest.mark.multiprocess
def test_worker_processes_and_parallel_maps_carry_tags_and_resume_every_item_once():
    def runner(rank: int, world: int, workers: int, inner: int, outer: int) -> Any:
        df = BatchData(Ids(N, rank=rank, world_size=world, remainder="uneven"), inner, remainder=True)
        return BatchData(MultiProcessRunnerZMQ(df, workers, hwm=2), outer, remainder=True, use_list=True)

    def maps(rank: int, world: int, workers: int, inner: int, outer: int) -> Any:
        df = Ids(N, rank=rank, world_size=world, remainder="uneven")
        df = MultiProcessMapDataZMQ(df, workers, lambda dp: [dp[0] + 0, dp[1]], buffer_size=5)
        return MultiProcessMapAndBatchDataZMQ(df, workers, lambda dp: dp, inner * outer)

    PIPELINES.update(runner=runner, maps=maps)
    try:
        check_jobs("runner", [((2, 2, 3, 1), 2), ((3, 3, 1, 2), 1)], final_count=2 * N)
        check_jobs("maps", [((2, 2, 1, 1), 3), ((1, 3, 2, 1), 4)], final_count=2 * N)
    finally:
        del PIPELINES["runner"], PIPELINES["maps"]
