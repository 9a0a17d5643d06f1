"""DataFlows written against the reference's older API (``get_data()`` and ``size()``) iterate, have a
length, wrap, run in worker processes and train through TrainConfig as if they defined ``__iter__``
and ``__len__``."""

from __future__ import annotations

import numpy as np
import pytest

from support.trainer_models import ArrayBatches, LinearRegression, linear_data
from towerpack.dataflow import (
    BatchData,
    DataFlow,
    LengthUnknownError,
    MultiProcessRunner,
    ProxyDataFlow,
    RNGDataFlow,
    dataflow_len,
)
from towerpack.trainer import Callback, SimpleTrainer, TrainConfig, launch_train_with_config
from towerpack.trainer.compat import tf


class OldCounter(DataFlow):
    """``[i]`` for i < n, in the older API only."""

    def __init__(self, n: int) -> None:
        self.n = n

    def size(self):
        return self.n

    def get_data(self):
        for i in range(self.n):
            yield [np.int64(i)]


class OldUnsized(DataFlow):
    """An older-API dataflow whose size() says "not known" the way the reference's did."""

    def size(self):
        raise NotImplementedError()

    def get_data(self):
        yield from ([1], [2])


class OldShuffled(RNGDataFlow):
    """The reference's usual older-API source: a RNGDataFlow subclass shuffling its items."""

    def __init__(self, n: int) -> None:
        self.n = n

    def size(self):
        return self.n

    def get_data(self):
        order = np.arange(self.n)
        self.rng.shuffle(order)
        for i in order:
            yield [np.int64(i)]


class OldTens(OldCounter):
    """A subclass of an older-API subclass that overrides get_data only."""

    def get_data(self):
        for (i,) in super().get_data():
            yield [i * 10]


class OldDoubling(ProxyDataFlow):
    """A ProxyDataFlow subclass that overrides get_data (ProxyDataFlow itself defines __iter__)."""

    def get_data(self):
        for (i,) in self.ds.get_data():
            yield [2 * i]


class BothStyles(DataFlow):
    """Defines both APIs: the newer one is what iter() and len() use."""

    def __iter__(self):
        yield ["new"]

    def __len__(self):
        return 1

    def get_data(self):
        yield ["old"]

    def size(self):
        return 99


def values(df) -> list:
    df.reset_state()
    return [dp[0] for dp in df]


def test_an_old_style_dataflow_iterates_and_has_a_length():
    df = OldCounter(5)
    assert len(df) == 5 and dataflow_len(df) == 5
    assert values(df) == [0, 1, 2, 3, 4]
    assert list(df) == [[0], [1], [2], [3], [4]]
    assert [dp[0] for dp in df.get_data()] == [0, 1, 2, 3, 4] and df.size() == 5


def test_an_old_style_size_that_is_not_known_is_no_length():
    df = OldUnsized()
    with pytest.raises(LengthUnknownError):
        len(df)
    assert dataflow_len(df) is None
    assert list(df) == [[1], [2]]  # list() asks len() for a size hint; "not known" must not fail it


def test_old_style_subclasses_of_rng_and_of_old_style_dataflows():
    shuffled = OldShuffled(8)
    shuffled.seed = 3
    first = values(shuffled)
    assert sorted(first) == list(range(8)) and first != list(range(8)) and len(shuffled) == 8
    assert values(OldTens(3)) == [0, 10, 20] and len(OldTens(3)) == 3


def test_a_proxy_subclass_overriding_get_data_is_what_iter_gives():
    df = OldDoubling(OldCounter(4))
    assert values(df) == [0, 2, 4, 6] and len(df) == 4


def test_a_class_with_both_styles_keeps_the_new_one():
    df = BothStyles()
    assert list(df) == [["new"]] and len(df) == 1
    assert df.size() == 99 and list(df.get_data()) == [["old"]]


def test_old_style_dataflows_wrap_in_batch_data():
    batched = BatchData(OldDoubling(OldCounter(7)), 3, remainder=False)
    assert len(batched) == 2
    assert [b.tolist() for b in values(batched)] == [[0, 2, 4], [6, 8, 10]]


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_an_old_style_dataflow_runs_in_worker_processes():
    with MultiProcessRunner(OldTens(6), num_prefetch=4, num_proc=1) as df:
        assert len(df) == 6
        assert values(df) == [0, 10, 20, 30, 40, 50]
        assert [dp[0] for dp in df] == [0, 10, 20, 30, 40, 50]  # a second epoch


class OldBatches(DataFlow):
    """The trainer tests' linear-regression batches, written in the older API."""

    def __init__(self, x, y, batch_size: int) -> None:
        self.x, self.y, self.batch_size = x, y, batch_size

    def size(self):
        return len(self.x) // self.batch_size

    def get_data(self):
        for k in range(self.size()):
            sel = slice(k * self.batch_size, (k + 1) * self.batch_size)
            yield [self.x[sel], self.y[sel]]


class ReadWeights(Callback):
    def _trigger(self):
        tower = self.trainer.towers[0]
        self.w, self.b = self.trainer.sess.run([tower.get_variable("w"), tower.get_variable("b")])


def _train(dataflow) -> tuple[ReadWeights, SimpleTrainer, TrainConfig]:
    weights = ReadWeights()
    with tf.Graph().as_default():
        config = TrainConfig(
            model=LinearRegression(lr=0.05), dataflow=dataflow, callbacks=[weights], max_epoch=2, monitors=[]
        )
        trainer = SimpleTrainer()
        launch_train_with_config(config, trainer)
    return weights, trainer, config


def test_simple_trainer_trains_on_an_old_style_dataflow_as_on_a_new_one():
    x, y, _ = linear_data(96, seed=5)
    old, old_trainer, config = _train(OldBatches(x, y, batch_size=16))
    assert config.steps_per_epoch == 6  # found from size()
    assert old_trainer.global_step == 12
    new, _, _ = _train(ArrayBatches(x, y, batch_size=16))
    np.testing.assert_array_equal(old.w, new.w)
    np.testing.assert_array_equal(old.b, new.b)
    assert np.abs(old.w).sum() > 0  # it learned something
