"""Augmentor randomness: reproducible with a job seed, different per worker, fresh in every forked process."""

from __future__ import annotations

import os
import pickle
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from towerpack.dataflow import DataFromList, MapData, MultiProcessRunnerZMQ
from towerpack.dataflow.imgaug.base import AugmentorList
from towerpack.dataflow.imgaug.crop import RandomCrop
from towerpack.dataflow.imgaug.misc import Flip
from towerpack.dataflow.pipeline.seeding import SEED_VAR
from towerpack.dataflow.pipeline.sharding import WorkerInfo, get_worker_info, set_worker_info

IMG = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)


def _in_fork(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a forked child and return its (pickled) result."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery past this point
        code = 1
        try:
            os.close(read_end)
            with os.fdopen(write_end, "wb") as out:
                out.write(pickle.dumps(fn()))
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the forked child failed (see its traceback above)"
    return pickle.loads(data)


def _build() -> AugmentorList:
    return AugmentorList([RandomCrop(20), Flip(horiz=True), RandomCrop(10)])  # numpy only: fork-safe


def _draws(augs: AugmentorList, n: int = 8) -> np.ndarray:
    return np.stack([augs.augment(IMG) for _ in range(n)])


def _build_and_draw(worker: tuple[int, int] | None = None) -> Callable[[], np.ndarray]:
    def run() -> np.ndarray:
        if worker is not None:
            set_worker_info(WorkerInfo(*worker))
        return _draws(_build())

    return run


@pytest.mark.timeout(30)
def test_seeded_lists_built_the_same_way_draw_the_same(monkeypatch):
    monkeypatch.setenv(SEED_VAR, "5")
    first = _in_fork(_build_and_draw())
    second = _in_fork(_build_and_draw())
    np.testing.assert_array_equal(first, second)
    assert len({d.tobytes() for d in first}) > 1  # the draws themselves vary
    monkeypatch.setenv(SEED_VAR, "6")
    assert not np.array_equal(_in_fork(_build_and_draw()), first)


@pytest.mark.timeout(30)
def test_seeded_workers_draw_different_streams(monkeypatch):
    monkeypatch.setenv(SEED_VAR, "5")
    w0 = _in_fork(_build_and_draw((0, 2)))
    w1 = _in_fork(_build_and_draw((1, 2)))
    assert not np.array_equal(w0, w1)
    np.testing.assert_array_equal(_in_fork(_build_and_draw((1, 2))), w1)


@pytest.mark.timeout(30)
def test_an_augmentor_used_before_fork_draws_anew_in_each_child(monkeypatch):
    monkeypatch.delenv(SEED_VAR, raising=False)
    augs = _build()
    _draws(augs, 1)  # the parent's generators are now seeded
    children = [_in_fork(lambda: _draws(augs)) for _ in range(2)]
    parent = _draws(augs)
    assert not np.array_equal(children[0], children[1])
    assert not np.array_equal(children[0], parent)


@pytest.mark.timeout(30)
def test_seeded_augmentor_made_in_the_parent_follows_the_worker(monkeypatch):
    monkeypatch.setenv(SEED_VAR, "11")
    augs = _build()
    _draws(augs, 1)

    def in_worker(index: int) -> Callable[[], np.ndarray]:
        def run() -> np.ndarray:
            set_worker_info(WorkerInfo(index, 2))
            return _draws(augs)

        return run

    w0, w1, w0_again = _in_fork(in_worker(0)), _in_fork(in_worker(1)), _in_fork(in_worker(0))
    assert not np.array_equal(w0, w1)
    np.testing.assert_array_equal(w0, w0_again)


def test_reset_state_repeats_a_seeded_stream(monkeypatch):
    monkeypatch.setenv(SEED_VAR, "3")
    augs = _build()
    augs.reset_state()
    first = _draws(augs)
    augs.reset_state()
    np.testing.assert_array_equal(_draws(augs), first)


def test_without_a_seed_reset_state_draws_fresh(monkeypatch):
    monkeypatch.delenv(SEED_VAR, raising=False)
    augs = _build()
    first = _draws(augs)
    augs.reset_state()
    assert not np.array_equal(_draws(augs), first)


def _offsets_per_worker(augs: AugmentorList, per_worker: int = 6) -> dict[int, list[tuple[int, ...]]]:
    """Run ``augs`` in a MapData inside two real runner workers; the crop offsets each worker drew."""

    def augment(dp):
        t = augs.get_transform(IMG)
        return [np.array([t.tfms[0].y0, t.tfms[0].x0]), np.array(get_worker_info().index)]

    got: dict[int, list[tuple[int, ...]]] = {0: [], 1: []}
    source = DataFromList([[np.array(i)] for i in range(per_worker)], shuffle=False)
    with MultiProcessRunnerZMQ(MapData(source, augment), num_proc=2, hwm=2) as df:
        df.reset_state()
        for _ in range(500):  # epochs of mixed streams, until both workers have sent enough
            if min(len(v) for v in got.values()) >= per_worker:
                break
            for dp in df:
                got[int(dp[1])].append(tuple(dp[0]))
    assert min(len(v) for v in got.values()) >= per_worker, "a worker sent too few datapoints"
    return {k: v[:per_worker] for k, v in got.items()}


@pytest.mark.timeout(60)
def test_runner_workers_draw_their_own_streams_without_a_seed(monkeypatch):
    monkeypatch.delenv(SEED_VAR, raising=False)
    augs = AugmentorList([RandomCrop(4)])
    _draws(augs, 1)
    got = _offsets_per_worker(augs)
    assert got[0] != got[1]


@pytest.mark.timeout(60)
def test_runner_workers_repeat_their_streams_with_a_seed(monkeypatch):
    monkeypatch.setenv(SEED_VAR, "7")
    augs = AugmentorList([RandomCrop(4)])
    first, second = _offsets_per_worker(augs), _offsets_per_worker(augs)
    assert first == second
    assert first[0] != first[1]
