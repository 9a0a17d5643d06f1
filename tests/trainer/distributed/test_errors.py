"""Clear errors for a bad cluster description, a missing Horovod, or a trainer that cannot reduce."""

from __future__ import annotations

import importlib.abc
import json
import sys

import pytest

from towerpack.trainer.cluster import read_tf_config
from towerpack.trainer.compat import tf
from towerpack.trainer.horovod_trainer import import_horovod

SPEC = {"worker": ["127.0.0.1:1", "127.0.0.1:2"], "ps": ["127.0.0.1:3"]}


def test_tf_config_is_parsed():
    task = read_tf_config(json.dumps({"cluster": SPEC, "task": {"type": "worker", "index": 1}}))
    assert (task.job, task.index, task.num_workers, task.num_ps, task.is_chief) == ("worker", 1, 2, 1, False)
    assert task.device == "/job:worker/task:1"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "TF_CONFIG is not set"),
        ("{not json", "must be JSON"),
        (json.dumps({"cluster": SPEC}), "must be JSON"),
        (json.dumps({"cluster": SPEC, "task": {"type": "worker", "index": 2}}), "not in its cluster"),
        (json.dumps({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 0}}), "no worker"),
    ],
)
def test_bad_tf_config_is_named(value, message, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", value)
    with pytest.raises((RuntimeError, ValueError), match=message):
        read_tf_config()


def test_missing_horovod_names_the_install_step(monkeypatch):
    monkeypatch.setitem(sys.modules, "horovod", None)
    monkeypatch.setitem(sys.modules, "horovod.tensorflow", None)
    with pytest.raises(ImportError, match=r"make setup.*HOROVOD=0"):
        import_horovod()


def test_horovod_built_against_another_tensorflow_names_the_install_step(monkeypatch):
    """Such a build fails to load its op library with TensorFlow's NotFoundError, not ImportError."""

    class BrokenHorovod(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "horovod" or name.startswith("horovod."):
                raise tf.errors.NotFoundError(None, None, "mpi_lib.so: undefined symbol: _ZN10tensorflow")
            return None

    for name in [m for m in sys.modules if m == "horovod" or m.startswith("horovod.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [BrokenHorovod(), *sys.meta_path])
    with pytest.raises(ImportError, match=r"NotFoundError: .*undefined symbol.*make setup") as info:
        import_horovod()
    assert isinstance(info.value.__cause__, tf.errors.NotFoundError)


def test_distributed_inference_needs_horovod(graph):
    from support.trainer_models import ArrayBatches, LinearRegression, linear_data
    from towerpack.trainer import (
        DistributedInferenceRunner,
        ScalarStats,
        SimpleTrainer,
        TrainConfig,
        launch_train_with_config,
    )

    x, y, _ = linear_data(32)
    config = TrainConfig(
        model=LinearRegression(),
        dataflow=ArrayBatches(x, y, batch_size=8),
        callbacks=[DistributedInferenceRunner(ArrayBatches(x, y, batch_size=8), ScalarStats("cost"))],
        max_epoch=1,
    )
    with pytest.raises(TypeError, match="needs a HorovodTrainer"):
        launch_train_with_config(config, SimpleTrainer())
