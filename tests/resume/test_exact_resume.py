"""Exact resume: a run stopped mid-epoch continues in a new process where it stopped, each item of the
epoch trained exactly once across the stop, also with other numbers of data workers or ranks.

The model's step fetches the ids of the batch it trains on, so the ids counted are the ones trained
on, not the ones prefetched. This file is also the training script the tests run in new processes
(``python test_exact_resume.py <options as JSON>``).
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from support.id_model import IdModel, TrainedIds
from towerpack.dataflow import BatchData, DataFromList, MultiProcessMapDataZMQ, MultiProcessRunnerZMQ
from towerpack.dataflow.dataset.base import ArrayDataset
from towerpack.dataflow.resume.position import DataPosition, PositionUnsupportedError
from towerpack.dataflow.resume.tracker import PositionTracker
from towerpack.trainer import (
    AutoResumeTrainConfig,
    Callback,
    JSONWriter,
    MinSaver,
    ModelSaver,
    PeriodicTrigger,
    PreemptionSaver,
    ProgressBar,
    SimpleTrainer,
    StopTraining,
    TrainConfig,
    launch_train_with_config,
    logger,
)
from towerpack.trainer.batch_policy import BatchPolicy, batch_for_world_size
from towerpack.trainer.compat import tf
from towerpack.trainer.input_source import FeedInput, QueueInput
from towerpack.trainer.resume_state import (
    RECORD_SUFFIX,
    PositionKeeper,
    ResumeRecord,
    TrainerPosition,
    resume_step,
)

N_ITEMS = 48
BATCH = 4
STEPS = N_ITEMS // BATCH  # per epoch, one rank
TESTS_DIR = Path(__file__).resolve().parents[1]


class Items(ArrayDataset):
    """Items 0..n-1 in a shuffled (seed, epoch) order; each datapoint is its item id."""

    _columns = ("ids",)

    def __init__(self, n: int, **order):
        self.ids = np.arange(n, dtype=np.int64)
        self._init_order(True, training=True, seed=7, **order)


class RecordIds(TrainedIds):
    """Fetches the ids each step trains on; writes ``[[epoch, local_step, global_step, ids], ...]``."""

    def __init__(self, path):
        self.path, self.rows, self._ids = str(path), [], None

    def _trigger_step(self):
        self.rows.append([self.epoch_num, self.local_step, self.global_step, self._ids])

    def _after_train(self):
        Path(self.path).write_text(json.dumps(self.rows))


class At(Callback):
    """At global step ``step``: send ``signal`` to this process, or raise StopTraining (a crash
    without a checkpoint)."""

    _chief_only = False

    def __init__(self, step, sig=None):
        self.step, self.sig = step, sig

    def _trigger_step(self):
        if self.global_step == self.step:
            if self.sig is None:
                raise StopTraining("crash")
            os.kill(os.getpid(), self.sig)


class PutVal(Callback):
    """Reports a scalar ``val`` at every epoch's end (for MinSaver), or with every step."""

    def __init__(self, every_step=False):
        self.every_step = every_step

    def _trigger_step(self):
        if self.every_step:
            self.trainer.monitors.put_scalar("val", float(self.global_step))

    def _trigger_epoch(self):
        self.trainer.monitors.put_scalar("val", 1.0)


def dataflow(workers: int, **order):
    df = Items(N_ITEMS, **order)
    if workers:
        df = MultiProcessRunnerZMQ(df, num_proc=workers)
    return BatchData(df, BATCH)


def train(opts: dict) -> None:
    """One training run as ``opts`` says (see the tests)."""
    cls = AutoResumeTrainConfig if opts.get("resume") else TrainConfig
    df = dataflow(opts["workers"])
    saver = ModelSaver(max_to_keep=100)
    if opts.get("save_every"):
        saver = PeriodicTrigger(saver, every_k_steps=opts["save_every"])
    callbacks = [saver, RecordIds(opts["ids"])]
    if opts.get("stop_at"):
        callbacks.append(At(opts["stop_at"], opts.get("signal")))
    if opts.get("step_scalars"):
        callbacks.append(PutVal(every_step=True))
    with tf.Graph().as_default():
        config = cls(
            model=IdModel(N_ITEMS),
            data=QueueInput(df) if opts.get("queue") else FeedInput(df),
            callbacks=callbacks,
            extra_callbacks=[PreemptionSaver(), ProgressBar()],
            monitors=[JSONWriter()],
            steps_per_epoch=opts["steps"],
            max_epoch=opts.get("max_epoch", 3),
            logdir=opts["logdir"],
            exact_resume=True,
        )
        launch_train_with_config(config, SimpleTrainer())


def run_script(opts: dict, env: dict | None = None) -> subprocess.Popen:
    full_env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(TESTS_DIR), os.environ.get("PYTHONPATH", "")])
    )
    full_env.update(TF_CPP_MIN_LOG_LEVEL="3", TOWERPACK_PROGRESS_INTERVAL="0.001", **(env or {}))
    return subprocess.Popen(
        [sys.executable, __file__, json.dumps(opts)],
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen, timeout: float = 120) -> str:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode == 0, f"training failed ({proc.returncode}):\n{out}\n{err[-4000:]}"
    return err


def rows(path) -> list:
    return json.loads(Path(path).read_text())


def ids_of_epoch(rows_, epoch, until_step=None) -> list[int]:
    return [
        i for e, _, gs, ids in rows_ if e == epoch and (until_step is None or gs <= until_step) for i in ids
    ]


def assert_once(ids, n=N_ITEMS):
    counts = collections.Counter(ids)
    assert sorted(counts) == list(range(n)), f"missing {sorted(set(range(n)) - set(counts))}"
    assert max(counts.values()) == 1, f"trained twice: {sorted(i for i, c in counts.items() if c > 1)}"


def stats_epochs(logdir) -> list[tuple[int, int]]:
    return [(s["epoch_num"], s["global_step"]) for s in json.loads((Path(logdir) / "stats.json").read_text())]


# ---- stop and resume in new processes --------------------------------------------------------


RANK_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


@pytest.mark.timeout(240)
def test_two_preempted_ranks_are_continued_by_one_process_each_item_once(tmp_path, monkeypatch):
    # Two ranks with 2 data workers each (RANK/WORLD_SIZE as a launcher sets them; SimpleTrainer needs
    # no all-reduce, so they run here one after the other) stop on SIGUSR1 after the same step; rank 0
    # saves. A new process alone, with 1 worker, then finishes their epoch: it has twice the steps per
    # epoch, and starts where the two ranks' data left off.
    logdir = tmp_path / "log"
    per_rank = STEPS // 2
    stop = per_rank + 2  # epoch 2, 2 steps done by each rank: 16 of the 48 items
    before = []
    for r in range(2):
        for name, value in zip(RANK_VARS, (r, 2, r, 2), strict=True):
            monkeypatch.setenv(name, str(value))
        logger.unset_logger_dir()
        ids = tmp_path / f"rank{r}.json"
        train(
            {
                "logdir": str(logdir),
                "steps": per_rank,
                "workers": 2,
                "ids": str(ids),
                "stop_at": stop,
                "signal": signal.SIGUSR1,
            }
        )
        before.append(rows(ids))
    for name in RANK_VARS:
        monkeypatch.delenv(name)
    logger.unset_logger_dir()
    assert [r[2] for r in before[1]] == list(range(1, stop + 1))
    assert not (logdir / "stats.json.tmp").exists() and sorted(
        p.name for p in logdir.glob("model-*.index")
    ) == [
        f"model-{per_rank}.index",
        f"model-{stop}.index",
    ]
    record = ResumeRecord.read(str(logdir / f"model-{stop}"))
    assert record.trainer == TrainerPosition(
        global_step=stop, epoch=2, step_in_epoch=2, steps_per_epoch=per_rank
    )
    assert record.data.epoch == 2 and record.data.count == 2 * 2 * BATCH and record.data_follows_epochs

    after_ids = tmp_path / "one.json"
    err = finish(
        run_script(
            {"logdir": str(logdir), "steps": STEPS, "workers": 1, "ids": str(after_ids), "resume": True}
        )
    )
    after = rows(after_ids)
    left = (N_ITEMS - 16) // BATCH
    # Epoch 2 continues at step 4 of 12 (a third done, as by the two ranks) and global step stop + 1.
    assert [(e, s, gs) for e, s, gs, _ in after[:2]] == [
        (2, STEPS - left, stop + 1),
        (2, STEPS - left + 1, stop + 2),
    ]
    assert [r[2] for r in after] == list(range(stop + 1, stop + left + STEPS + 1))
    assert_once(ids_of_epoch(before[0], 2) + ids_of_epoch(before[1], 2) + ids_of_epoch(after, 2))
    assert_once(ids_of_epoch(after, 3))
    assert stats_epochs(logdir) == [(1, per_rank), (2, stop + left), (3, stop + left + STEPS)]
    # The progress bar of the resumed epoch starts at its step, not at 0.
    assert f"epoch 2: {STEPS - left}/{STEPS} (" in err and f"epoch 2: 0/{STEPS}" not in err


@pytest.mark.timeout(240)
def test_a_crash_after_a_checkpoint_retrains_only_what_the_checkpoint_missed(tmp_path):
    # QueueInput prefetches far ahead of training; only trained batches count. 1 -> 3 workers.
    logdir, first, second = tmp_path / "log", tmp_path / "ids1.json", tmp_path / "ids2.json"
    base = {"logdir": str(logdir), "steps": STEPS, "queue": True, "save_every": 5, "step_scalars": True}
    train({**base, "workers": 1, "ids": str(first), "stop_at": 19})  # saved at 5, 10, 15
    logger.unset_logger_dir()
    saved = 15  # epoch 2, 3 steps done; steps 16..19 are lost with the crash
    finish(run_script({**base, "workers": 3, "ids": str(second), "resume": True, "max_epoch": 2}))
    a, b = rows(first), rows(second)
    assert [r[2] for r in a][-1] == 19
    assert [(e, s, gs) for e, s, gs, _ in b[:1]] == [(2, 3, saved + 1)]
    assert_once(ids_of_epoch(a, 2, until_step=saved) + ids_of_epoch(b, 2))
    # stats.json has a record per step: those of the lost steps 16..19 are replaced, not repeated.
    expected = [(1 if gs <= STEPS else 2, gs) for gs in range(1, 2 * STEPS + 1)]
    assert stats_epochs(logdir) == expected


# ---- the arithmetic and the record, in this process ------------------------------------------


def keeper(world_size: int, rank: int = 0) -> PositionKeeper:
    return PositionKeeper(PositionTracker.of(dataflow(0, rank=rank, world_size=world_size)), 1, world_size)


def test_resume_step_follows_the_data_at_another_world_size():
    old = keeper(2)
    old.tracker.start(None)
    # Two ranks did 3 of their 6 steps of epoch 1: 24 of the 48 items.
    record = old.record(TrainerPosition(3, 1, 3, STEPS // 2), 3)
    assert record.data_follows_epochs and record.data.count == 24
    # The 24 items left, split among the new ranks in whole batches of 4 ("uneven": 4 ranks get the
    # 6 batches as 2, 2, 1, 1, and rank 0 continues at step 1 of 3).
    for world, steps, start in ((1, 12, 6), (2, 6, 3), (3, 4, 2), (4, 3, 1)):
        assert resume_step(record, keeper(world), steps) == (1, start)
    # A finished epoch resumes at the next one's start.
    done = old.record(TrainerPosition(6, 1, STEPS // 2, STEPS // 2), 6)
    assert resume_step(done, keeper(1), STEPS) == (2, 0)


def test_epochs_that_do_not_follow_the_data_resume_at_the_same_fraction():
    k = keeper(1)
    k.tracker.start(None)
    record = k.record(TrainerPosition(5, 1, 5, 20), 5)  # 20 steps an epoch: not one data epoch
    assert not record.data_follows_epochs
    assert resume_step(record, k, 20) == (1, 5)
    assert resume_step(record, k, 40) == (1, 10)


def test_the_record_round_trips_and_damaged_records_are_named(tmp_path):
    record = ResumeRecord(TrainerPosition(7, 2, 3, 12), DataPosition(2, 48, ((0, 12),)), 1, 2, True)
    path = record.write(str(tmp_path / "model-7"))
    assert path == str(tmp_path / "model-7.position.json")
    assert ResumeRecord.read(str(tmp_path / "model-7")) == record
    assert ResumeRecord.read(str(tmp_path / "model-8")) is None
    Path(path).write_text("{not json")
    with pytest.raises(ValueError, match=r"model-7\.position\.json is not valid JSON"):
        ResumeRecord.read(str(tmp_path / "model-7"))
    Path(path).write_text(json.dumps({"format": 1, "trainer": {"epoch": 1}}))
    with pytest.raises(ValueError, match=r"model-7\.position\.json is not a valid resume record"):
        ResumeRecord.read(str(tmp_path / "model-7"))
    with pytest.raises(ValueError, match="inconsistent trainer position"):
        TrainerPosition(7, 2, 13, 12)


def _train_here(logdir, config_cls=TrainConfig, df=None, callbacks=(), **kw):
    with tf.Graph().as_default():
        config = config_cls(
            model=IdModel(N_ITEMS),
            dataflow=df if df is not None else dataflow(0),
            callbacks=list(callbacks),
            extra_callbacks=[PreemptionSaver()],
            monitors=[JSONWriter()],
            logdir=str(logdir),
            **kw,
        )
        trainer = SimpleTrainer()
        launch_train_with_config(config, trainer)
    return trainer


@pytest.mark.timeout(60)
def test_checkpoints_carry_their_record_and_old_ones_go_with_it(tmp_path):
    logdir = tmp_path / "log"
    ids = tmp_path / "ids.json"
    saver = PeriodicTrigger(ModelSaver(max_to_keep=2, keep_checkpoint_every_n_hours=0), every_k_steps=4)
    callbacks = [saver, RecordIds(ids), PutVal(), MinSaver("val")]
    _train_here(logdir, callbacks=callbacks, max_epoch=1, exact_resume=True)
    names = sorted(p.name for p in logdir.iterdir() if "position" in p.name)
    assert names == ["min-val.position.json", "model-12.position.json", "model-8.position.json"]
    assert ResumeRecord.read(str(logdir / "min-val")) == ResumeRecord.read(str(logdir / "model-12"))
    record = ResumeRecord.read(str(logdir / "model-8"))
    trained = ids_of_epoch(rows(ids), 1, until_step=8)
    # The record's consumed positions are exactly the items trained on.
    order = Items(N_ITEMS)
    order.reset_state()
    first_epoch = [int(dp[0]) for dp in order]
    consumed = [first_epoch[p] for a, b in record.data.consumed for p in range(a, b)]
    assert sorted(consumed) == sorted(trained)


@pytest.mark.timeout(60)
def test_an_in_process_resume_without_a_record_runs_the_epoch_again(tmp_path):
    logdir = tmp_path / "log"
    _train_here(logdir, callbacks=[ModelSaver(), At(STEPS + 2, signal.SIGUSR1)], max_epoch=2)
    assert not list(logdir.glob("*.position.json"))  # tracking off: no record
    config_trainer = _train_here(logdir, AutoResumeTrainConfig, max_epoch=2, exact_resume=True)
    assert config_trainer.starting_step == 0 and config_trainer.global_step == STEPS + 2 + STEPS


@pytest.mark.timeout(60)
def test_a_record_that_contradicts_its_checkpoint_is_an_error(tmp_path):
    logdir = tmp_path / "log"
    _train_here(
        logdir, callbacks=[ModelSaver(), At(STEPS + 2, signal.SIGUSR1)], max_epoch=2, exact_resume=True
    )
    path = logdir / f"model-{STEPS + 2}{RECORD_SUFFIX}"
    obj = json.loads(path.read_text())
    obj["trainer"]["global_step"] = 3
    path.write_text(json.dumps(obj))
    with (
        tf.Graph().as_default(),
        pytest.raises(ValueError, match="records global_step 3, but the checkpoint holds"),
    ):
        AutoResumeTrainConfig(
            model=IdModel(N_ITEMS), dataflow=dataflow(0), logdir=str(logdir), exact_resume=True
        )


def test_a_dataflow_that_cannot_track_its_position_is_named(tmp_path):
    df = BatchData(DataFromList([[i] for i in range(8)], shuffle=False), 2)
    with pytest.raises(PositionUnsupportedError, match="DataFromList"):
        _train_here(tmp_path / "log", df=df, max_epoch=1, exact_resume=True)


def test_records_of_format_1_still_load(tmp_path):
    record = ResumeRecord(TrainerPosition(7, 2, 3, 12), DataPosition(2, 48, ((0, 12),)), 1, 2, True)
    obj = record.to_json()
    assert obj["format"] == 2
    obj["format"] = 1  # what the version before later epochs wrote: the same fields
    (tmp_path / "model-7.position.json").write_text(json.dumps(obj))
    assert ResumeRecord.read(str(tmp_path / "model-7")) == record
    obj["format"] = 3
    (tmp_path / "model-7.position.json").write_text(json.dumps(obj))
    with pytest.raises(
        ValueError, match=r"not a resume record of a format this version reads \(\(1, 2\), got 3\)"
    ):
        ResumeRecord.read(str(tmp_path / "model-7"))


def test_ranks_without_an_all_reduce_refuse_a_pipeline_in_completion_order(tmp_path, monkeypatch):
    # SimpleTrainer in 2 processes shares nothing: the chief must replay the other rank's stream.
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    df = BatchData(MultiProcessMapDataZMQ(Items(N_ITEMS), 2, lambda dp: dp), BATCH)
    with pytest.raises(
        PositionUnsupportedError, match=r"MultiProcessMapDataZMQ .* cannot be replayed; it needs tag mode"
    ):
        _train_here(tmp_path / "log", df=df, max_epoch=1, exact_resume=True)


def test_exact_resume_is_a_bool():
    with pytest.raises(TypeError, match="exact_resume= must be True or False"):
        TrainConfig(model=IdModel(N_ITEMS), dataflow=dataflow(0), exact_resume="yes")


# ---- batch policy ------------------------------------------------------------------------------


def test_constant_global_batch_divides_it_among_the_replicas():
    setup = batch_for_world_size(
        BatchPolicy.CONSTANT_GLOBAL_BATCH, learning_rate=0.1, global_batch=256, world_size=4
    )
    assert (setup.batch_per_replica, setup.global_batch, setup.learning_rate) == (64, 256, 0.1)
    setup = batch_for_world_size(
        "constant-global-batch", learning_rate=0.1, global_batch=256, world_size=2, towers_per_rank=2
    )
    assert (setup.world_size, setup.batch_per_replica) == (4, 64)
    with pytest.raises(ValueError, match=r"global batch 256 does not divide among 3 replicas"):
        batch_for_world_size(
            BatchPolicy.CONSTANT_GLOBAL_BATCH, learning_rate=0.1, global_batch=256, world_size=3
        )


def test_scale_lr_keeps_the_batch_and_scales_the_learning_rate():
    setup = batch_for_world_size(
        BatchPolicy.SCALE_LR, learning_rate=0.1, batch_per_replica=32, base_world_size=4, world_size=8
    )
    assert (setup.batch_per_replica, setup.global_batch) == (32, 256)
    assert setup.learning_rate == pytest.approx(0.2)
    with pytest.raises(ValueError, match="SCALE_LR takes batch_per_replica= and base_world_size="):
        batch_for_world_size(BatchPolicy.SCALE_LR, learning_rate=0.1, global_batch=256)
    with pytest.raises(ValueError, match="unknown batch policy 'bigger'"):
        batch_for_world_size("bigger", learning_rate=0.1, global_batch=256)


def test_the_policy_reads_the_world_size_of_the_placement_and_logs(monkeypatch, caplog):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    setup = batch_for_world_size(BatchPolicy.CONSTANT_GLOBAL_BATCH, learning_rate=0.5, global_batch=64)
    assert setup.batch_per_replica == 32
    assert "Batch policy CONSTANT_GLOBAL_BATCH: 2 replicas x batch 32 = global batch 64" in caplog.text


if __name__ == "__main__":
    logger.info("exact-resume script: %s", sys.argv[1])
    train(json.loads(sys.argv[1]))
