"""Exact resume end to end under `launch`: a Horovod job whose items carry their ids and data epoch is
stopped with SIGUSR1 in the middle of an epoch, resumed at the same size, stopped again, and resumed
with another number of ranks and of workers. Every data epoch trains each item once.

The pipeline is the reference's LMDB recipe (records read in order, an endless LocallyShuffleData
that mixes epochs, a MultiProcessMapDataZMQ that delivers in completion order), which only tags can
track; the elastic tests (test_elastic_training.py) cover the worker-runner pipeline.
"""

from __future__ import annotations

import numpy as np
import pytest

from support.items_jobs import N_ITEMS, assert_each_item_once, start, steps_done, stop_after
from support.launcher_run import assert_job_gone

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]


@pytest.mark.timeout(600)
def test_the_lmdb_recipe_resumes_at_the_same_and_at_another_size(tmp_path, horovod_required):
    from towerpack.dataflow import DataFromList, LMDBSerializer

    path = str(tmp_path / "items.lmdb")
    LMDBSerializer.save(DataFromList([[np.int64(i)] for i in range(N_ITEMS)], shuffle=False), path)
    logdir = tmp_path / "log"
    logdir.mkdir()
    lmdb = ["--pipeline", "lmdb", "--lmdb", path]
    # 2 ranks, 2 map workers each: 30 steps an epoch; stopped in epoch 2.
    stop_after(start(logdir, 2, *lmdb, "--workers", "2"), logdir, 40)
    first = steps_done(logdir)
    # The same size again, stopped in epoch 3.
    stop_after(start(logdir, 2, *lmdb, "--workers", "2"), logdir, first + 30)
    second = steps_done(logdir)
    # One rank with 3 workers finishes (60 steps an epoch).
    proc = start(logdir, 1, *lmdb, "--workers", "3")
    assert proc.wait(timeout=240) == 0
    assert_job_gone(timeout=2.0)
    starts = [line.split() for line in (logdir / "events").read_text().splitlines()]
    assert [(int(s[3]), int(s[4])) for s in starts] == [(2, 0), (2, 0), (2, first), (2, first), (1, second)]
    assert_each_item_once(logdir, in_buffers=50)  # LocallyShuffleData(df, 50) mixes epochs
