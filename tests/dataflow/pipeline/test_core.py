"""Unit tests for the core dataflows: sources, transforms, sharding and speed measurement."""

import numpy as np
import pytest

from towerpack.dataflow import (
    BatchData,
    ConcatData,
    DataFlow,
    DataFromGenerator,
    DataFromList,
    FakeData,
    FixedSizeData,
    JoinData,
    LocallyShuffleData,
    MapData,
    MapDataComponent,
    ProxyDataFlow,
    RepeatedData,
    RNGDataFlow,
    ShardData,
    TestDataSpeed,
    benchmark,
)


def ints(n):
    return DataFromList([[i] for i in range(n)], shuffle=False)


def firsts(df):
    return [dp[0] for dp in df]


def test_base_dataflow_has_no_length_and_no_iteration():
    df = DataFlow()
    with pytest.raises(NotImplementedError):
        len(df)
    with pytest.raises(NotImplementedError):
        iter(df)
    df.reset_state()  # a no-op that must exist


def test_proxy_forwards_everything():
    inner = ints(3)
    df = ProxyDataFlow(inner)
    df.reset_state()
    assert len(df) == 3
    assert firsts(df) == [0, 1, 2]


def test_reference_old_names_size_and_get_data():
    # Reference-era scripts still call df.size() and df.get_data() (e.g. an evaluation loop).
    df = BatchData(FakeData([[2]], size=6, random=False), 2)
    df.reset_state()
    assert df.size() == len(df) == 3
    assert [dp[0].shape for dp in df.get_data()] == [(2, 2)] * 3
    with pytest.raises(NotImplementedError):
        DataFromGenerator(lambda: iter([[0]])).size()


def test_rng_dataflow_reseeds_per_reset_and_honours_seed():
    class Draw(RNGDataFlow):
        def __iter__(self):
            yield [self.rng.randint(1 << 30)]

    a, b = Draw(), Draw()
    a.reset_state()
    b.reset_state()
    assert firsts(a) != firsts(b)
    a.seed = b.seed = 7
    a.reset_state()
    b.reset_state()
    assert firsts(a) == firsts(b)


def test_data_from_list_order_and_shuffle():
    assert firsts(ints(5)) == [0, 1, 2, 3, 4]
    df = DataFromList([[i] for i in range(50)], shuffle=True)
    df.reset_state()
    one, two = firsts(df), firsts(df)
    assert sorted(one) == list(range(50)) and sorted(two) == list(range(50))
    assert one != list(range(50)) and one != two
    assert len(df) == 50


def test_data_from_list_shuffle_needs_reset():
    with pytest.raises(RuntimeError, match="reset_state"):
        list(DataFromList([[1], [2]]))


def test_unknown_length_is_not_implemented_yet_list_still_works():
    df = DataFromGenerator(lambda: ([i] for i in range(3)))
    with pytest.raises(NotImplementedError):
        len(df)
    assert list(df) == [[0], [1], [2]]


def test_data_from_generator_function_and_object():
    df = DataFromGenerator(lambda: ([i] for i in range(3)), size=3)
    assert firsts(df) == [0, 1, 2] and firsts(df) == [0, 1, 2]
    assert len(df) == 3
    once = DataFromGenerator([i] for i in range(2))
    assert firsts(once) == [0, 1]
    with pytest.raises(RuntimeError, match="only once"):
        list(once)
    with pytest.raises(NotImplementedError):
        len(once)


def test_fake_data_shapes_dtypes_and_fixed_arrays():
    df = FakeData([[2, 3], [4]], size=5, dtype=["uint8", "int32"], domain=(0, 10))
    df.reset_state()
    dps = list(df)
    assert len(dps) == len(df) == 5
    assert dps[0][0].shape == (2, 3) and dps[0][0].dtype == np.uint8
    assert dps[0][1].shape == (4,) and dps[0][1].dtype == np.int32
    assert all(dp[0].min() >= 0 and dp[0].max() < 10 for dp in dps)
    fixed = FakeData([[3]], size=3, random=False)
    fixed.reset_state()
    out = list(fixed)
    assert out[0][0] is out[1][0] is out[2][0]
    with pytest.raises(ValueError, match="dtypes"):
        FakeData([[1], [2]], dtype=["float32"])


def test_fake_data_takes_one_domain_and_dtype_per_component():
    df = FakeData(
        [[50], [50], [50]], size=20, dtype=["uint8", "float32", "int64"], domain=[(0, 255), (-1, 1), (5, 8)]
    )
    df.reset_state()
    for a, b, c in df:
        assert (a.dtype, b.dtype, c.dtype) == (np.uint8, np.float32, np.int64)
        assert 8 < a.max() <= 254 and b.min() >= -1 and b.max() < 1 and b.min() < 0
        assert set(np.unique(c)) <= {5, 6, 7}
    seen = np.concatenate([dp[2] for dp in df])
    assert set(np.unique(seen)) == {5, 6, 7}  # the whole range is drawn, high excluded
    one = FakeData([[100], [100]], size=3, dtype="int32", domain=[10, 12])  # a single pair, as a list
    one.reset_state()
    assert all(set(np.unique(x)) <= {10, 11} for dp in one for x in dp)
    with pytest.raises(ValueError, match="2 domains given for 3 shapes"):
        FakeData([[1], [1], [1]], domain=[(0, 1), (0, 2)])
    with pytest.raises(ValueError, match="domain 1 has low 3 > high 2"):
        FakeData([[1], [1]], domain=[(0, 1), (3, 2)])
    with pytest.raises(TypeError, match="domain must be a"):
        FakeData([[1]], domain=(0, 1, 2))


def test_batch_data_stacks_and_counts():
    df = BatchData(DataFromList([[np.full((2,), i), i] for i in range(10)], shuffle=False), 4)
    assert len(df) == 2
    batches = list(df)
    assert len(batches) == 2
    np.testing.assert_array_equal(batches[1][0], [[4, 4], [5, 5], [6, 6], [7, 7]])
    np.testing.assert_array_equal(batches[0][1], [0, 1, 2, 3])


def test_batch_data_remainder():
    df = BatchData(ints(10), 4, remainder=True)
    assert len(df) == 3
    assert [b[0].tolist() for b in df] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert len(BatchData(ints(8), 4, remainder=True)) == 2


def test_batch_data_dicts_and_use_list():
    df = BatchData(DataFromList([{"x": np.ones(2) * i, "y": i} for i in range(4)], shuffle=False), 2)
    first = next(iter(df))
    assert first["x"].shape == (2, 2) and first["y"].tolist() == [0, 1]
    ragged = BatchData(DataFromList([[np.ones(i + 1)] for i in range(2)], shuffle=False), 2, use_list=True)
    assert [a.shape for a in next(iter(ragged))[0]] == [(1,), (2,)]


def test_batch_data_ragged_shapes_give_a_clear_error():
    df = BatchData(DataFromList([[np.ones(3)], [np.ones(4)]], shuffle=False), 2)
    with pytest.raises(ValueError, match=r"component 0.*\(3,\).*\(4,\)"):
        list(df)
    nested = BatchData(DataFromList([[[1, 2]], [[1, 2, 3]]], shuffle=False), 2)
    with pytest.raises(ValueError, match="component 0"):
        list(nested)
    with pytest.raises(ValueError, match="components"):
        list(BatchData(DataFromList([[1, 2], [1]], shuffle=False), 2))
    with pytest.raises(ValueError, match="batch_size"):
        BatchData(ints(3), 0)


def test_map_data_and_none_drops():
    df = MapData(ints(6), lambda dp: None if dp[0] % 2 else [dp[0] * 10])
    assert firsts(df) == [0, 20, 40]
    assert len(df) == 6


def test_map_data_component_copies_and_maps():
    source = [[1, "a"], [2, "b"]]
    df = MapDataComponent(DataFromList(source, shuffle=False), lambda s: s.upper(), index=1)
    assert list(df) == [[1, "A"], [2, "B"]]
    assert source == [[1, "a"], [2, "b"]]
    dicts = MapDataComponent(DataFromList([{"k": 1}], shuffle=False), lambda v: v + 1, index="k")
    assert list(dicts) == [{"k": 2}]
    drop = MapDataComponent(ints(3), lambda v: None if v == 1 else v)
    assert firsts(drop) == [0, 2]


def test_repeated_data():
    df = RepeatedData(ints(3), 2)
    assert len(df) == 6 and firsts(df) == [0, 1, 2, 0, 1, 2]
    forever = RepeatedData(ints(2), -1)
    with pytest.raises(NotImplementedError):
        len(forever)
    it = iter(forever)
    assert [next(it)[0] for _ in range(5)] == [0, 1, 0, 1, 0]
    with pytest.raises(RuntimeError, match="no datapoints"):
        next(iter(RepeatedData(ints(0), -1)))
    with pytest.raises(ValueError):
        RepeatedData(ints(1), 0)


def test_fixed_size_data_keeps_state_across_epochs():
    df = FixedSizeData(ints(5), 3)
    assert len(df) == 3
    assert firsts(df) == [0, 1, 2]
    assert firsts(df) == [3, 4, 0]
    fresh = FixedSizeData(ints(5), 3, keep_state=False)
    assert firsts(fresh) == [0, 1, 2] and firsts(fresh) == [0, 1, 2]
    with pytest.raises(RuntimeError, match="no datapoints"):
        list(FixedSizeData(ints(0), 2))


def test_locally_shuffle_data_yields_each_once():
    df = LocallyShuffleData(ints(100), buffer_size=10, exact_epochs=True)
    df.reset_state()
    out = firsts(df)
    assert sorted(out) == list(range(100)) and out != list(range(100))
    # A small buffer only moves datapoints locally: the first output comes from the first buffer.
    assert out[0] < 11
    with pytest.raises(ValueError):
        LocallyShuffleData(ints(3), 0)


def test_concat_data():
    df = ConcatData([ints(2), ints(3)])
    df.reset_state()
    assert len(df) == 5 and firsts(df) == [0, 1, 0, 1, 2]


def test_join_data_lists_and_dicts():
    a = DataFromList([[i] for i in range(3)], shuffle=False)
    b = DataFromList([[i * 10, "x"] for i in range(3)], shuffle=False)
    df = JoinData([a, b])
    df.reset_state()
    assert list(df) == [[0, 0, "x"], [1, 10, "x"], [2, 20, "x"]] and len(df) == 3
    d = JoinData([DataFromList([{"a": 1}], shuffle=False), DataFromList([{"b": 2}], shuffle=False)])
    assert list(d) == [{"a": 1, "b": 2}]
    with pytest.raises(ValueError, match="different lengths"):
        JoinData([ints(2), ints(3)])
    uneven = JoinData([DataFromGenerator(lambda: iter([[1], [2]])), DataFromGenerator(lambda: iter([[1]]))])
    with pytest.raises(RuntimeError, match="ended before"):
        list(uneven)


def test_shard_data_covers_every_datapoint_exactly_once():
    for world in (1, 2, 3, 4):
        seen = []
        for rank in range(world):
            shard = ShardData(ints(10), rank=rank, world_size=world, remainder="uneven")
            got = firsts(shard)
            assert len(got) == len(shard)
            seen += got
        assert sorted(seen) == list(range(10))
    even = [len(list(ShardData(ints(10), r, 3, drop_remainder=True))) for r in range(3)]
    assert even == [3, 3, 3]


def test_shard_data_gives_every_rank_the_same_count_by_default():
    shards = [firsts(ShardData(ints(10), rank=r, world_size=3)) for r in range(3)]
    # ceil(10 / 3) = 4 each: the first two datapoints of the epoch fill up the last ranks.
    assert shards == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
    dropped = [firsts(ShardData(ints(10), rank=r, world_size=3, remainder="drop")) for r in range(3)]
    assert dropped == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    with pytest.raises(ValueError, match="remainder must be one of 'uneven', 'pad', 'drop'"):
        ShardData(ints(10), 0, 3, remainder="even")
    unknown = DataFromGenerator(lambda: iter(range(10)))
    with pytest.raises(NotImplementedError, match="pass remainder='uneven'"):
        list(ShardData(unknown, 0, 2))
    assert list(ShardData(unknown, 1, 2, remainder="uneven")) == [1, 3, 5, 7, 9]


def test_shard_data_seeds_shuffling_inputs_alike_in_every_rank():
    """Each rank shuffles with the same seed, so together they still see each datapoint once per epoch."""
    shards = [ShardData(DataFromList(list(range(30)), shuffle=True), r, 3) for r in range(3)]
    for s in shards:
        s.reset_state()
    for _ in range(2):  # a new permutation every epoch, the same in every rank
        epoch = [list(s) for s in shards]
        assert sorted(x for part in epoch for x in part) == list(range(30))
    assert epoch != [list(range(r, 30, 3)) for r in range(3)]


def test_shard_data_reads_launcher_environment(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    assert firsts(ShardData(ints(7), remainder="uneven")) == [1, 4]
    assert firsts(ShardData(ints(7))) == [1, 4, 0]
    monkeypatch.setenv("RANK", "3")
    with pytest.raises(ValueError, match="outside"):
        ShardData(ints(7))
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(ValueError, match="RANK"):
        ShardData(ints(7))


def test_benchmark_reports_rates(capsys):
    df = FakeData([[100]], size=10, dtype="uint8", random=False)
    report = benchmark(df, size=25, progress=False)
    assert report.datapoints == 25 and report.nbytes == 2500
    assert report.datapoints_per_s > 0 and report.mb_per_s > 0
    TestDataSpeed(df, size=5).start()
    assert "datapoints/s" in capsys.readouterr().out
