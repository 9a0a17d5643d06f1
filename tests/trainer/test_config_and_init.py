"""TrainConfig checks, the log directory (never a prompt), session init and session config."""

import numpy as np
import pytest

from support.trainer_models import ArrayBatches, LinearRegression, linear_data
from towerpack.trainer import (
    Callback,
    ChainInit,
    DictRestore,
    FeedInput,
    ModelDesc,
    ModelSaver,
    SaverRestore,
    SimpleTrainer,
    SmartInit,
    TrainConfig,
    launch_train_with_config,
    logger,
)
from towerpack.trainer.compat import tf, tfv1

pytestmark = pytest.mark.usefixtures("graph")


def data(n=64):
    x, y, _ = linear_data(n)
    return ArrayBatches(x, y, batch_size=16)


def test_steps_per_epoch_defaults_to_the_input_size():
    assert TrainConfig(model=LinearRegression(), dataflow=data()).steps_per_epoch == 4
    assert TrainConfig(model=LinearRegression(), data=FeedInput(data())).steps_per_epoch == 4
    assert TrainConfig(model=LinearRegression(), dataflow=data(), steps_per_epoch=7).steps_per_epoch == 7


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(dataflow=data(), data=FeedInput(data())), ValueError, "not both"),
        (dict(dataflow=FeedInput(data())), TypeError, "must be a DataFlow"),
        (dict(data=data()), TypeError, "pass a DataFlow as dataflow="),
        (dict(dataflow=data(), model="nope"), TypeError, "must be a ModelDesc"),
        (dict(dataflow=data(), callbacks=[object()]), TypeError, "is not one"),
        (
            dict(
                dataflow=data(),
                session_config=tfv1.ConfigProto(),
                session_creator=tfv1.train.ChiefSessionCreator(),
            ),
            ValueError,
            "not both",
        ),
        (dict(), ValueError, "steps_per_epoch is required"),
        (dict(dataflow=data(), optimizer="sgd"), TypeError, "unknown argument"),
    ],
)
def test_bad_configs_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        TrainConfig(**kwargs)


def test_old_tower_arguments_are_accepted():
    config = TrainConfig(model=LinearRegression(), dataflow=data(), nr_tower=2, predict_tower=[0])
    assert config.tower == [0, 1] and config.predict_tower == [0]


def test_bad_model_inputs_are_named():
    class Dup(ModelDesc):
        def inputs(self):
            return [tf.TensorSpec([1], tf.float32, "a"), tf.TensorSpec([1], tf.float32, "a")]

    class Slash(ModelDesc):
        def inputs(self):
            return [tf.TensorSpec([1], tf.float32, "a/b")]

    class OldStyle(ModelDesc):
        def inputs(self):
            return [tfv1.placeholder(tf.float32, [None, 2], "img")]

    with pytest.raises(ValueError, match="unique"):
        Dup().get_input_signature()
    with pytest.raises(ValueError, match="must not contain"):
        Slash().get_input_signature()
    assert OldStyle().get_input_signature() == [tf.TensorSpec([None, 2], tf.float32, "img")]
    assert tfv1.get_default_graph().get_operations() == []  # placeholders went to a throw-away graph


def test_set_logger_dir_never_prompts(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "old.txt").write_text("x")
    with pytest.raises(FileExistsError, match="action="):
        logger.set_logger_dir(str(d))
    assert logger.set_logger_dir(str(d), action="k") == str(d) and (d / "old.txt").exists()
    new = logger.set_logger_dir(str(d), action="n")
    assert new != str(d) and (d / "old.txt").exists()
    logger.set_logger_dir(str(d), action="b")
    assert not (d / "old.txt").exists() and len(list(tmp_path.iterdir())) == 3
    (d / "more.txt").write_text("y")
    logger.set_logger_dir(str(d), action="d")
    assert sorted(p.name for p in d.iterdir()) == ["log.log"]
    with pytest.raises(ValueError, match="unknown logger dir action"):
        logger.set_logger_dir(str(d), action="x")


def test_auto_set_dir_names_the_directory_after_the_script(tmp_path, monkeypatch):
    import sys
    import types

    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "__main__", types.SimpleNamespace(__file__="/x/mnist-convnet.py"))
    assert logger.auto_set_dir() == "train_log/mnist-convnet"
    assert logger.auto_set_dir(action="k", name="run2") == "train_log/mnist-convnet:run2"
    assert (tmp_path / "train_log" / "mnist-convnet" / "log.log").exists()
    with pytest.raises(FileExistsError, match="action="):
        logger.auto_set_dir()


def test_train_config_logdir_is_used(tmp_path):
    d = tmp_path / "cfgdir"
    config = TrainConfig(
        model=LinearRegression(), dataflow=data(), max_epoch=1, logdir=str(d), callbacks=[ModelSaver()]
    )
    launch_train_with_config(config, SimpleTrainer())
    assert logger.get_logger_dir() == str(d)
    assert (d / "stats.json").exists() and (d / "checkpoint").exists()


class Read(Callback):
    def _before_train(self):
        t = self.trainer.towers[0]
        self.w, self.b = self.trainer.sess.run([t.get_variable("w"), t.get_variable("b")])
        self.devices = [d.name for d in self.trainer.sess.list_devices()]


def run(session_init=None, max_epoch=0, **kw):
    read = Read()
    config = TrainConfig(
        model=LinearRegression(),
        dataflow=data(),
        max_epoch=max_epoch,
        callbacks=[read],
        monitors=[],
        session_init=session_init,
        **kw,
    )
    launch_train_with_config(config, SimpleTrainer())
    return read


def test_dict_restore_chain_init_and_npz(tmp_path):
    w = np.arange(4, dtype=np.float32)
    read = run(DictRestore({"w:0": w}))
    np.testing.assert_array_equal(read.w, w)
    np.savez(tmp_path / "init.npz", w=w * 2, b=np.float32(3))
    with tf.Graph().as_default():
        read = run(ChainInit([DictRestore({"w": w}), SmartInit(str(tmp_path / "init.npz"))]))
    np.testing.assert_array_equal(read.w, w * 2)
    assert read.b == 3
    with tf.Graph().as_default(), pytest.raises(ValueError, match="shape"):
        run(DictRestore({"w": np.zeros(5, np.float32)}))


def test_saver_restore_from_a_checkpoint_directory(logdir):
    run(max_epoch=1, extra_callbacks=[ModelSaver()])
    saved = tfv1.train.load_variable(str(logdir), "w")
    assert np.abs(saved).sum() > 0
    with tf.Graph().as_default():
        read = run(SaverRestore(str(logdir)))
    np.testing.assert_array_equal(read.w, saved)
    with pytest.raises(FileNotFoundError, match="not found"):
        SaverRestore(str(logdir / "missing"))


def test_session_config_is_honoured():
    read = run(session_config=tfv1.ConfigProto(device_count={"CPU": 3}))
    assert sum("CPU" in d for d in read.devices) == 3
