"""LocallyShuffleData: the reference's num_reuse and shuffle_interval, endless iteration, exact epochs."""

import collections
import itertools

import numpy as np
import pytest

from towerpack.dataflow import (
    BatchData,
    DataFlow,
    DataFromList,
    IndexedList,
    LocallyShuffleData,
    MultiProcessRunnerZMQ,
    PositionTracker,
    PositionUnsupportedError,
    ShardData,
)

N = 40


class Passes(DataFlow):
    """``[i, pass]`` for i in 0..n-1, the pass counted from 1 at every ``iter()``."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.passes = 0

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        self.passes += 1
        for i in range(self.n):
            yield [i, self.passes]


def test_exact_epochs_yield_every_datapoint_num_reuse_times_per_epoch():
    df = LocallyShuffleData(Passes(N), buffer_size=12, num_reuse=3, shuffle_interval=5, exact_epochs=True)
    df.reset_state()
    assert len(df) == 3 * N
    epochs = [list(df) for _ in range(3)]
    for k, epoch in enumerate(epochs, start=1):
        assert len(epoch) == 3 * N
        assert collections.Counter(i for i, _ in epoch) == {i: 3 for i in range(N)}
        assert {p for _, p in epoch} == {k}  # one pass per epoch
    orders = [[i for i, _ in e] for e in epochs]
    assert orders[0] != orders[1] != orders[2]
    # A buffer of 12 (4 datapoints x 3) only moves datapoints locally: the first output is one of
    # the first 4 datapoints, shuffled when the fifth one came.
    assert orders[0][0] < 4


def test_the_default_runs_on_through_passes_mixing_them_and_losing_nothing():
    source = Passes(N)
    df = LocallyShuffleData(source, buffer_size=16, num_reuse=2)  # shuffle_interval: 16 // 3
    df.reset_state()
    assert len(df) == 2 * N
    first = list(itertools.islice(iter(df), 7))  # an iteration abandoned early
    rest = list(itertools.islice(iter(df), 5 * len(df)))  # goes on far past one epoch
    out = first + rest
    assert len(out) == 7 + 5 * 2 * N and source.passes >= 5
    counts = collections.Counter((i, p) for i, p in out)
    # Every datapoint of a pass that has flowed through the buffer came out exactly num_reuse times.
    for p in range(1, 4):
        assert [counts[(i, p)] for i in range(N)] == [2] * N, f"pass {p}"
    passes = [p for _, p in out]
    assert passes != sorted(passes)  # passes are mixed: a later pass before the end of an earlier one
    assert [i for i, _ in out[: 2 * N]] != sorted(i for i, _ in out[: 2 * N])


def test_shuffle_interval_sets_how_often_the_buffer_is_shuffled():
    # Never shuffled within the run (interval larger than the input): the buffer is a plain FIFO,
    # so the output is the input, each datapoint num_reuse times in a row.
    fifo = LocallyShuffleData(
        DataFromList([[i] for i in range(30)], shuffle=False), 8, 2, shuffle_interval=1000
    )
    fifo.reset_state()
    assert [dp[0] for dp in itertools.islice(iter(fifo), 40)] == [i // 2 for i in range(40)]
    often = LocallyShuffleData(
        DataFromList([[i] for i in range(30)], shuffle=False), 8, 2, shuffle_interval=1
    )
    often.reset_state()
    assert [dp[0] for dp in itertools.islice(iter(often), 40)] != [i // 2 for i in range(40)]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"buffer_size": 0}, "buffer_size must be a positive integer"),
        ({"buffer_size": 4, "num_reuse": 0}, "num_reuse must be a positive integer"),
        ({"buffer_size": 4, "shuffle_interval": 0}, "shuffle_interval must be a positive integer"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LocallyShuffleData(Passes(3), **kwargs)


def test_an_empty_input_raises_instead_of_spinning():
    df = LocallyShuffleData(DataFromList([], shuffle=False), 4)
    df.reset_state()
    with pytest.raises(RuntimeError, match="no datapoints"):
        next(iter(df))


def test_exact_resume_tracks_it_with_tags_and_refuses_to_replay_it():
    for exact in (False, True):
        items = IndexedList([[np.int64(i)] for i in range(8)], rank=0, world_size=1)
        tracker = PositionTracker.of(BatchData(LocallyShuffleData(items, 4, exact_epochs=exact), 2))
        with pytest.raises(PositionUnsupportedError, match="LocallyShuffleData cannot be replayed"):
            tracker.start(None)  # replaying (tests/resume/test_tags.py resumes it with tags)


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_runners_count_epochs_over_the_endless_mode_and_keep_exact_ones_exact():
    """Two workers split the input; endless buffers never end a pass, so the runner counts len datapoints."""

    def pipeline(exact: bool):
        ds = ShardData(DataFromList([[np.int64(i)] for i in range(N)], shuffle=False))
        return MultiProcessRunnerZMQ(LocallyShuffleData(ds, 8, num_reuse=2, exact_epochs=exact), 2, hwm=4)

    with pipeline(exact=False) as endless, pipeline(exact=True) as exact:
        endless.reset_state()
        exact.reset_state()
        assert not endless.exact and exact.exact
        for _ in range(3):
            assert len([dp for dp in endless]) == 2 * N
            epoch = [int(dp[0]) for dp in exact]
            assert collections.Counter(epoch) == {i: 2 for i in range(N)}
