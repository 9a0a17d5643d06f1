"""Restarting a running trainer's input in place at a new world size (``resize/input_restart.py``).

A SimpleTrainer trains in this process with a real session and, for the runner pipelines, real worker
processes; the model fetches the ids of the batch each step trains on, so the ids counted are the ones
trained, not the ones prefetched. At a step, a callback does what the regroup does (the new placement in
the environment, the job's state loaded into the position keeper) and calls ``restart_input``; training
then runs the steps it returned as left of the epoch. The other rank of the job is played by a second
pipeline in this process, sharded by explicit overrides.
"""

from __future__ import annotations

import collections
import itertools

import numpy as np
import pytest

from support.id_model import IdModel, TrainedIds
from towerpack.dataflow import BatchData, MultiProcessRunnerZMQ
from towerpack.dataflow.dataset.base import ArrayDataset
from towerpack.dataflow.parallel.maps import MultiProcessMapDataZMQ
from towerpack.dataflow.parallel.runners import MultiThreadRunner
from towerpack.dataflow.pipeline.stream import LocallyShuffleData
from towerpack.dataflow.resume.keys import keys_of
from towerpack.dataflow.resume.position import DataPosition
from towerpack.dataflow.resume.ranges import ranges_of
from towerpack.dataflow.resume.tracker import PositionMode, PositionTracker
from towerpack.trainer import (
    Callback,
    SimpleTrainer,
    StopTraining,
    TrainConfig,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf
from towerpack.trainer.input_source import FeedInput, QueueInput, StagingInput, ZMQInput
from towerpack.trainer.resize.input_restart import InputRestartError, restart_input, why_input_cannot_restart
from towerpack.trainer.resume_state import PositionKeeper

N, BATCH, WORKERS = 96, 4, 2
PLACEMENT = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


class Items(ArrayDataset):
    """Items 0..N-1 in a shuffled (seed, epoch) order, sharded by placement unless told; each datapoint is
    its item id; ``remainder="drop"``, as the elastic tests' job."""

    _columns = ("ids",)

    def __init__(self, rank: int | None = None, world_size: int | None = None):
        self.ids = np.arange(N, dtype=np.int64)
        self._init_order(True, training=True, seed=7, remainder="drop", rank=rank, world_size=world_size)


class RecordIds(TrainedIds):
    """The ids every step trained on, one list per step."""

    def __init__(self):
        self.steps: list[list[int]] = []

    def _trigger_step(self):
        self.steps.append(self._ids)

    def ids(self, first: int = 0, stop: int | None = None) -> list[int]:
        return [i for step in self.steps[first:stop] for i in step]


class ResizeAt(Callback):
    """After global step ``at``: the regroup's part (``placement`` into the environment, then
    ``regroup(trainer)``), then ``restart_input``; training stops once the epoch's steps left have run
    (or ``then`` steps)."""

    _chief_only = False

    def __init__(self, at: int, placement: tuple[int, int], monkeypatch, regroup=None, then=None):
        self.at, self.placement, self.monkeypatch, self.regroup = at, placement, monkeypatch, regroup
        self.then = then
        self.bounds: tuple[int, int] | None = None
        self._stop_at: int | None = None

    def _trigger_step(self):
        if self.global_step == self.at:
            set_placement(self.monkeypatch, *self.placement)
            if self.regroup is not None:
                self.regroup(self.trainer)
            self.bounds = restart_input(self.trainer)
            self._stop_at = self.at + (self.bounds[0] - self.bounds[1] if self.then is None else self.then)
        if self._stop_at is not None and self.global_step >= self._stop_at:
            raise StopTraining("the epoch has ended")


def set_placement(monkeypatch, rank: int, world_size: int) -> None:
    for name, value in zip(PLACEMENT, (rank, world_size, rank, world_size), strict=True):
        monkeypatch.setenv(name, str(value))


def pipeline(kind: str, workers: int = WORKERS, **shard):
    """``runner``: the elastic tests' pipeline (batches made in worker processes); else batches made here."""
    df = BatchData(Items(**shard), BATCH)
    return MultiProcessRunnerZMQ(df, workers) if kind == "runner" else df


def source_of(kind: str, df):
    return FeedInput(df) if kind == "feed" else QueueInput(df)


class RankOfTwo(SimpleTrainer):
    """A SimpleTrainer that trains in step with a second rank whose rows in the collectives are empty (its
    items reach this rank in the regroup's state): the tag exchange of Horovod ranks, in one process."""

    size = 2

    def allgather(self, tensor, name=None):
        return tf.concat([tensor, tf.zeros_like(tensor)], 0, name=name)

    def allreduce_sum(self, tensor, name=None):
        return tf.identity(tensor, name=name)


def train(source, callbacks, exact_resume: bool = True, trainer=None) -> None:
    config = TrainConfig(
        model=IdModel(N),
        data=source,
        callbacks=callbacks,
        extra_callbacks=[],
        monitors=[],
        max_epoch=20,
        exact_resume=exact_resume,
    )
    launch_train_with_config(config, trainer or SimpleTrainer())


def close(df) -> None:
    if hasattr(df, "close"):
        df.close()


def positions_of_ids(ids: list[int], epoch: int = 1) -> np.ndarray:
    """Where items ``ids`` are in ``epoch``'s order."""
    return np.argsort(Items().epoch_order(epoch))[np.asarray(ids, dtype=np.int64)]


def keys_of_ids(ids: list[int], epoch: int = 1) -> np.ndarray:
    """The position keys of items ``ids`` of ``epoch``."""
    return keys_of(epoch, positions_of_ids(ids, epoch))


def rank_one_keeper(kind: str, steps: int) -> tuple[PositionKeeper, list[int]]:
    """Rank 1 of 2 of a job in tag mode, with one worker (the trainer's rank has two), after it trained
    ``steps`` steps: its keeper (its ledger holds its own items; the exchange would add the others')."""
    df = pipeline(kind, workers=1, rank=1, world_size=2)
    keeper = PositionKeeper(PositionTracker.of(df), 1, 2, PositionMode.TAGS)
    keeper.source = FeedInput(df)
    keeper.start(None)
    df.reset_state()
    stream = keeper.tracker.iterate()
    try:
        ids = [int(i) for dp in itertools.islice(stream, steps) for i in dp[0]]
        keeper.ledger.add(keeper.tracker.trained_keys(steps))
    finally:
        stream.close()
        close(df)
    return keeper, ids


def replayed_rank_ids(kind: str, rank: int, position, steps: int) -> list[int]:
    """The ids rank ``rank`` of 2 trains in its first ``steps`` steps from ``position`` (replaying, as a
    SimpleTrainer rank does)."""
    df = pipeline(kind, rank=rank, world_size=2)
    tracker = PositionTracker.of(df)
    tracker.start(position, PositionMode.REPLAY)
    df.reset_state()
    try:
        return [int(i) for dp in itertools.islice(df, steps) for i in dp[0]]
    finally:
        close(df)


def assert_each_once(ids: list[int], missing: int = 0) -> None:
    counts = collections.Counter(ids)
    assert max(counts.values()) == 1, f"trained twice: {sorted(i for i, c in counts.items() if c > 1)}"
    assert len(set(range(N)) - set(counts)) == missing and set(counts) <= set(range(N))


# ---- shrink and grow, each item of the epoch once --------------------------------------------------


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kind", ["runner", "feed"])
def test_a_rank_left_alone_finishes_the_epoch_of_both_ranks_each_item_once(kind, graph, monkeypatch):
    # Ranks 0 and 1 of 2 train 12 steps an epoch. Rank 1 (one worker, tag mode) got one step further
    # (5 + 1) than this rank (5) when its peer was lost; the regroup gives this rank rank 1's ledger
    # (both ranks' items), and it goes on alone: 24 steps an epoch, 2 * 5 + 1 of them done.
    at = 5
    set_placement(monkeypatch, 0, 2)
    rank1, rank1_ids = rank_one_keeper(kind, at + 1)
    record = RecordIds()

    def regroup(trainer):
        rank1.ledger.add(keys_of_ids(record.ids()))  # what the exchange told rank 1 of this rank's steps
        trainer.position_keeper.load_state_bytes(rank1.state_bytes())

    resize = ResizeAt(at, (0, 1), monkeypatch, regroup)
    train(source_of(kind, pipeline(kind)), [record, resize])
    assert resize.bounds == (N // BATCH, 2 * at + 1)
    assert len(record.steps) == at + N // BATCH - (2 * at + 1)
    assert_each_once(record.ids(0, at) + rank1_ids + record.ids(at))


@pytest.mark.timeout(90)
def test_ranks_that_exchange_tags_go_on_counting_the_job_in_the_ledger_after_a_shrink(graph, monkeypatch):
    # As Horovod ranks do: the exchange adds every step's items to the keeper's ledger, before the restart
    # (this rank's; the peer's come with the regroup's state) and after it, alone. After the last step of
    # the epoch the ledger has every item of epoch 1.
    at = 5
    set_placement(monkeypatch, 0, 2)
    rank1, rank1_ids = rank_one_keeper("runner", at + 1)
    record = RecordIds()
    trainer = RankOfTwo()

    def regroup(trainer):
        keeper = trainer.position_keeper
        mine = DataPosition.of(1, N, ranges_of(np.sort(positions_of_ids(record.ids()))))
        assert keeper.gathers and keeper.position(0) == mine  # this rank's steps, from the exchange
        rank1.ledger.add(keys_of_ids(record.ids()))
        trainer.size = 1
        keeper.load_state_bytes(rank1.state_bytes())

    resize = ResizeAt(at, (0, 1), monkeypatch, regroup)
    train(QueueInput(pipeline("runner")), [record, resize], trainer=trainer)
    assert resize.bounds == (N // BATCH, 2 * at + 1)
    assert_each_once(record.ids(0, at) + rank1_ids + record.ids(at))
    assert trainer.position_keeper.position(0) == DataPosition(2, N)


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("kind", "rank"), [("runner", 0), ("queue", 1)])
def test_a_joined_rank_splits_what_is_left_and_each_rank_trains_its_share(kind, rank, graph, monkeypatch):
    # One rank trains 5 of 24 steps, then the job grows to 2 ranks and this process becomes rank `rank`:
    # the 76 items left make 19 batches of 4, 9 for each rank (the 19th is the "drop" tail), so the epoch
    # has 12 steps at the new size, 3 of them done. The other rank replays its share from the same position.
    at = 5
    set_placement(monkeypatch, 0, 1)
    record = RecordIds()
    seen = {}

    def regroup(trainer):
        keeper = trainer.position_keeper
        keeper.load_state_bytes(keeper.state_bytes())  # every rank takes the source's state, itself too
        seen["position"] = keeper.position(trainer.datapoints_trained())

    resize = ResizeAt(at, (rank, 2), monkeypatch, regroup)
    train(source_of(kind, pipeline(kind)), [record, resize])
    left_each = (N - at * BATCH) // BATCH // 2
    assert resize.bounds == (N // BATCH // 2, N // BATCH // 2 - left_each)
    mine = record.ids(at)
    other = replayed_rank_ids(kind, 1 - rank, seen["position"], left_each)
    assert len(mine) == len(other) == left_each * BATCH
    assert_each_once(record.ids(0, at) + mine + other, missing=BATCH)


@pytest.mark.timeout(90)
def test_without_exact_resume_the_input_restarts_a_fresh_pass_of_the_new_shard(graph, monkeypatch):
    # Rank 0 of 2 (48 items an epoch) becomes rank 0 of 1: its next 24 steps are one pass of all 96 items.
    # The loop keeps its bounds: without a data position there is nothing to count the epoch by.
    set_placement(monkeypatch, 0, 2)
    record = RecordIds()
    resize = ResizeAt(5, (0, 1), monkeypatch, then=N // BATCH)
    train(QueueInput(pipeline("runner")), [record, resize], exact_resume=False)
    assert resize.bounds == (N // BATCH // 2, 5)
    assert set(record.ids(0, 5)) <= set(Items(0, 2).epoch_indices(1).tolist())
    assert_each_once(record.ids(5, 5 + N // BATCH))


# ---- what cannot restart is refused, by name -------------------------------------------------------


def setup_trainer(source) -> SimpleTrainer:
    trainer = SimpleTrainer()
    model = IdModel(N)
    trainer.setup_graph(model.get_input_signature(), source, model.build_graph, model.get_optimizer)
    return trainer


@pytest.mark.parametrize(
    "make",
    [
        lambda: QueueInput(pipeline("runner")),
        lambda: FeedInput(pipeline("plain")),
        lambda: QueueInput(LocallyShuffleData(pipeline("plain"), 8, exact_epochs=True)),
    ],
    ids=["runner", "feed", "shuffle-exact-epochs"],
)
def test_feed_and_queue_inputs_over_restartable_pipelines_can_restart(make, graph):
    assert why_input_cannot_restart(setup_trainer(make())) is None


@pytest.mark.parametrize(
    ("make", "named", "advice"),
    [
        (lambda: StagingInput(QueueInput(pipeline("plain"))), "StagingInput", "FeedInput and QueueInput"),
        (lambda: ZMQInput("ipc:///nonexistent-input-restart"), "RemoteDataZMQ", "servers"),
        (lambda: QueueInput(LocallyShuffleData(pipeline("plain"), 8)), "LocallyShuffleData", "exact_epochs"),
        (
            lambda: QueueInput(BatchData(MultiThreadRunner(lambda: Items(), 8, 2), BATCH)),
            "MultiThreadRunner",
            "MultiProcessRunnerZMQ",
        ),
        (
            lambda: QueueInput(BatchData(MultiProcessMapDataZMQ(Items(), 2, lambda dp: dp), BATCH)),
            "MultiProcessMapDataZMQ",
            "MultiProcessRunnerZMQ",
        ),
    ],
    ids=["staging", "servers", "endless-shuffle", "thread-runner", "process-map"],
)
def test_inputs_that_cannot_restart_are_refused_by_name(make, named, advice, graph):
    source = make()
    trainer = setup_trainer(source)
    why = why_input_cannot_restart(trainer)
    assert why is not None and named in why and advice in why, why
    with pytest.raises(InputRestartError, match=named):
        restart_input(trainer)
    close(getattr(source, "ds", None))


# ---- the keeper's state between ranks --------------------------------------------------------------


def tag_keeper(rank: int) -> PositionKeeper:
    df = pipeline("plain", rank=rank, world_size=2)
    keeper = PositionKeeper(PositionTracker.of(df), 1, 2, PositionMode.TAGS)
    keeper.source = FeedInput(df)
    keeper.start(None)
    return keeper


def test_the_keeper_state_moves_between_ranks_as_bytes():
    source, target = tag_keeper(1), tag_keeper(0)
    source.ledger.add(keys_of_ids([3, 5, 7, 11]))
    target.ledger.add(keys_of_ids([3, 13]))  # a step behind and one of its own: replaced, not merged
    target.load_state_bytes(source.state_bytes())
    assert target.position(0) == source.position(0)
    assert target.state_bytes() == source.state_bytes()


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        ("{}", TypeError, "takes bytes"),
        (b"\xff\xfe", ValueError, "unreadable as UTF-8 JSON"),
        (b"[1, 2", ValueError, "unreadable as UTF-8 JSON"),
        (b"[" * 100_000, ValueError, "unreadable as UTF-8 JSON"),
        (b'{"format": 1}', ValueError, "no kind"),
        (b'{"kind": "towerpack position keeper state", "format": 9}', ValueError, "format 9"),
        (b'{"kind": "towerpack position keeper state", "format": 1, "position": 3}', ValueError, "bad pos"),
        (
            b'{"kind": "towerpack position keeper state", "format": 1, '
            b'"position": {"epoch": 1, "size": 96, "consumed": [[5, 2]]}}',
            ValueError,
            "bad position",
        ),
        (
            b'{"kind": "towerpack position keeper state", "format": 1, '
            b'"position": {"epoch": 1, "size": 50, "consumed": [[0, 2]]}}',
            ValueError,
            "50 items",
        ),
    ],
)
def test_bytes_that_are_no_keeper_state_are_refused_and_change_nothing(data, error, message):
    keeper = tag_keeper(0)
    keeper.ledger.add(keys_of_ids([1, 2]))
    before = keeper.state_bytes()
    with pytest.raises(error, match=message):
        keeper.load_state_bytes(data)
    assert keeper.state_bytes() == before and keeper.loaded is None
