"""Session initializers and variable files: the reference's name matching and reports, relaxed
loading, dumps, checkpoint paths."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.sessinit import (
    ChainInit,
    DictRestore,
    JustCurrentSession,
    SaverRestore,
    SaverRestoreRelaxed,
    SmartInit,
    get_model_loader,
)
from towerpack.trainer.varmanip import (
    SessionUpdate,
    dump_session_params,
    get_all_checkpoints,
    get_checkpoint_path,
    load_checkpoint_vars,
    load_chkpt_vars,
    save_checkpoint_vars,
    save_chkpt_vars,
)

pytestmark = pytest.mark.usefixtures("graph")

W = np.arange(18, dtype=np.float32).reshape(3, 3, 1, 2)
SAVED = {
    "conv0/W": W,
    "conv0/b": np.array([1.0, 2.0], np.float32),
    "bn/mean/EMA": np.array([0.5, 0.25], np.float32),
    "conv0/W/Momentum": np.ones_like(W),  # an optimizer slot: not reported when unused
    "learning_rate": np.float32(0.1),
    "extra/unused": np.zeros(4, np.float32),
}


def _var(name, shape, dtype=tf.float32):
    return tfv1.get_variable(name, shape, dtype, initializer=tfv1.zeros_initializer())


def _model(b_shape=(2,), b_dtype=tf.float32):
    """Variables named as the reference's layers name them, plus one the checkpoint lacks."""
    return [
        _var("conv0/W", [3, 3, 1, 2]),
        _var("conv0/b", list(b_shape), b_dtype),
        _var("bn/mean/EMA", [2]),
        _var("learning_rate", []),
        _var("fc/W", [4, 2]),
    ]


def _init(session_init, variables):
    """Both phases of ``session_init`` after the variables' initializers; the variables' values."""
    session_init._setup_graph()
    sess = tfv1.Session()
    sess.run(tfv1.global_variables_initializer())
    session_init._run_init(sess)
    values = sess.run(variables)
    sess.close()
    return dict(zip([v.op.name for v in variables], values, strict=True))


@pytest.fixture
def checkpoint(tmp_path):
    path = str(tmp_path / "model-100")
    save_chkpt_vars(SAVED, path)
    return path


def test_smart_init_restores_a_reference_named_checkpoint_and_reports_what_did_not_match(checkpoint, caplog):
    init = SmartInit(checkpoint)
    assert type(init) is SaverRestore and get_model_loader is SmartInit
    with caplog.at_level(logging.INFO, logger="towerpack.trainer"):
        got = _init(init, _model())
    np.testing.assert_array_equal(got["conv0/W"], W)
    np.testing.assert_array_equal(got["bn/mean/EMA"], SAVED["bn/mean/EMA"])
    assert got["learning_rate"] == pytest.approx(0.1)
    np.testing.assert_array_equal(got["fc/W"], 0)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "The following variables are in the graph, but not found in the checkpoint: fc/W",
        "The following variables are in the checkpoint, but not found in the graph: extra/unused",
    ]
    assert f"Restoring checkpoint from {checkpoint} ..." in caplog.text


def test_saver_restore_prefix_ignore_and_old_keys_with_colon_zero(tmp_path, caplog):
    path = str(tmp_path / "old")
    with tf.Graph().as_default():  # an old checkpoint whose keys carry ":0"
        v = tfv1.Variable(np.array([7.0, 8.0], np.float32))
        lr = tfv1.Variable(np.float32(0.5))
        with tfv1.Session() as sess:
            sess.run(tfv1.global_variables_initializer())
            tfv1.train.Saver({"conv0/b:0": v, "learning_rate:0": lr}).save(sess, path, write_meta_graph=False)
    b = _var("student/conv0/b", [2])
    lr = _var("student/learning_rate", [])
    with caplog.at_level(logging.INFO, logger="towerpack.trainer"):
        got = _init(SaverRestore(path, prefix="student", ignore=["learning_rate"]), [b, lr])
    np.testing.assert_array_equal(got["student/conv0/b"], [7, 8])
    assert got["student/learning_rate"] == 0  # ignored
    assert "Variable learning_rate:0 in the graph will not be loaded from the checkpoint!" in caplog.text


def test_mismatched_shapes_fail_clearly_or_are_skipped_when_asked(checkpoint, caplog):
    _model(b_shape=(3,))
    with pytest.raises(
        ValueError, match=r"conv0/b: graph \[3\] float32, checkpoint \[2\] float32.*ignore_mismatch"
    ):
        SmartInit(checkpoint)._setup_graph()
    with tf.Graph().as_default():
        variables = _model(b_shape=(3,))
        init = SmartInit(checkpoint, ignore_mismatch=True)
        assert type(init) is SaverRestoreRelaxed
        ops_before = len(tf.compat.v1.get_default_graph().get_operations())
        with caplog.at_level(logging.WARNING, logger="towerpack.trainer"):
            got = _init(init, variables)
        # No op was added to restore (initializing and reading add none either).
        assert len(tf.compat.v1.get_default_graph().get_operations()) == ops_before + 1
        assert (
            "Cannot load an array of shape (2,) into variable 'conv0/b' whose shape is (3,)." in caplog.text
        )
        np.testing.assert_array_equal(got["conv0/b"], 0)
        np.testing.assert_array_equal(got["conv0/W"], W)


def test_relaxed_loading_reshapes_and_casts(checkpoint, caplog):
    variables = _model(b_shape=(1, 2), b_dtype=tf.float64)
    with caplog.at_level(logging.WARNING, logger="towerpack.trainer"):
        got = _init(SaverRestoreRelaxed(checkpoint), variables)
    np.testing.assert_array_equal(got["conv0/b"], [[1, 2]])
    assert "The tensor is reshaped from (2,) to (1, 2) when assigned to 'conv0/b'" in caplog.text
    assert "Variable conv0/b has dtype float64 but was given a value of dtype float32." in caplog.text
    step = _var("step", [], tf.int64)
    assert SessionUpdate.relaxed_value_for_var(np.int32(3), step).dtype == np.int64
    with pytest.raises(ValueError, match="cannot be converted"):
        SessionUpdate.relaxed_value_for_var(np.float32(3), step)


def test_dicts_npz_npy_lists_and_bad_input(tmp_path, caplog):
    variables = _model()
    np.savez(tmp_path / "a.npz", **{"conv0/W:0": W * 2, "conv0/b": np.array([5.0, 6.0], np.float32)})
    np.save(tmp_path / "b.npy", {"conv0/b:0": np.array([9.0, 9.0], np.float32), "nowhere": 1.0})
    with caplog.at_level(logging.WARNING, logger="towerpack.trainer"):
        got = _init(SmartInit([str(tmp_path / "a.npz"), str(tmp_path / "b.npy"), None]), variables)
    np.testing.assert_array_equal(got["conv0/W"], W * 2)
    np.testing.assert_array_equal(got["conv0/b"], [9, 9])  # later ones win
    assert "The following variables are in the dict, but not found in the graph: nowhere" in caplog.text
    assert type(SmartInit([str(tmp_path / "a.npz")])) is ChainInit
    assert type(SmartInit({"conv0/b": [1, 2]})) is DictRestore
    for nothing in (None, "", {}, []):
        assert type(SmartInit(nothing)) is JustCurrentSession
    with pytest.raises(ValueError, match="Cannot load an array of shape"):
        _init(SmartInit({"conv0/b": np.zeros(5, np.float32)}), variables)
    with caplog.at_level(logging.WARNING, logger="towerpack.trainer"):
        _init(SmartInit({"conv0/b": np.zeros(5, np.float32)}, ignore_mismatch=True), variables)
    assert "Skipped 1 variable(s) whose size did not match: conv0/b:0" in caplog.text
    np.save(tmp_path / "array.npy", np.zeros(3))
    with pytest.raises(ValueError, match="not a dict of variables"):
        SmartInit(str(tmp_path / "array.npy"))
    with pytest.raises(FileNotFoundError, match=r"no checkpoint, \.npz or \.npy"):
        SmartInit(str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        SmartInit(str(tmp_path / "missing.npz"))
    with pytest.raises(TypeError, match="Invalid argument to SmartInit"):
        SmartInit(3)


def test_dump_session_params_saves_the_model_and_smart_init_loads_it(tmp_path):
    w = tfv1.get_variable("fc/W", initializer=np.full((2, 2), 3.0, np.float32))
    ema = tfv1.get_variable(
        "bn/mean/EMA",
        initializer=np.ones(2, np.float32),
        trainable=False,
        collections=[tfv1.GraphKeys.GLOBAL_VARIABLES, tfv1.GraphKeys.MODEL_VARIABLES],
    )
    tfv1.get_variable("counter", initializer=4, trainable=False)  # neither trainable nor a model variable
    with tfv1.Session() as sess, sess.as_default():
        sess.run(tfv1.global_variables_initializer())
        dump_session_params(str(tmp_path / "model.npz"))
        dump_session_params(str(tmp_path / "model-ckpt"))
    with np.load(tmp_path / "model.npz") as f:
        assert sorted(f.files) == ["bn/mean/EMA:0", "fc/W:0"]
    assert sorted(load_chkpt_vars(str(tmp_path / "model-ckpt"))) == ["bn/mean/EMA", "fc/W"]
    with tf.Graph().as_default():
        w2 = _var("fc/W", [2, 2])
        got = _init(SmartInit(str(tmp_path / "model.npz")), [w2])
        np.testing.assert_array_equal(got["fc/W"], 3)
    tfv1.add_to_collection(tfv1.GraphKeys.MODEL_VARIABLES, w)
    with (
        tfv1.Session() as sess,
        sess.as_default(),
        pytest.raises(ValueError, match="both TRAINABLE_VARIABLES and MODEL_VARIABLES"),
    ):
        dump_session_params(str(tmp_path / "dup.npz"))
    assert ema is not None
    with pytest.raises(RuntimeError, match="default session"):
        dump_session_params(str(tmp_path / "x.npz"))


def test_save_and_load_checkpoint_vars(tmp_path):
    assert save_checkpoint_vars is save_chkpt_vars and load_checkpoint_vars is load_chkpt_vars
    values = {"a/b:0": np.arange(3, dtype=np.int64), "c": np.float64(2.5)}
    save_chkpt_vars(values, str(tmp_path / "vars"))
    assert not (tmp_path / "checkpoint").exists()  # a training directory's pointer is left alone
    loaded = load_chkpt_vars(str(tmp_path / "vars"))
    assert sorted(loaded) == ["a/b", "c"]
    np.testing.assert_array_equal(loaded["a/b"], [0, 1, 2])
    assert loaded["a/b"].dtype == np.int64 and loaded["c"] == 2.5
    save_chkpt_vars(values, str(tmp_path / "vars.npz"))
    assert sorted(load_chkpt_vars(str(tmp_path / "vars.npz"))) == ["a/b", "c"]
    with pytest.raises(ValueError, match=r"not \.npy"):
        save_chkpt_vars(values, str(tmp_path / "vars.npy"))


def test_checkpoint_paths(tmp_path, monkeypatch):
    for step in (100, 5, 20):
        save_chkpt_vars({"x": np.zeros(1)}, str(tmp_path / f"model-{step}"))
    save_chkpt_vars({"x": np.zeros(1)}, str(tmp_path / "other-7"))
    prefix = str(tmp_path / "model-20")
    assert get_checkpoint_path(prefix + ".index") == prefix
    assert get_checkpoint_path(prefix + ".data-00000-of-00001") == prefix
    monkeypatch.chdir(tmp_path)
    assert get_checkpoint_path("model-20") == os.path.join(".", "model-20")
    with pytest.raises(FileNotFoundError, match="no checkpoint in"):
        get_checkpoint_path(str(tmp_path))
    tfv1.train.update_checkpoint_state(str(tmp_path), prefix)
    assert get_checkpoint_path(str(tmp_path)) == prefix
    assert get_checkpoint_path(str(tmp_path / "checkpoint")) == prefix
    with pytest.raises(FileNotFoundError, match="not found"):
        get_checkpoint_path(str(tmp_path / "model-3"))
    found = get_all_checkpoints(str(tmp_path))
    assert found == [(str(tmp_path / f"model-{s}.index"), s) for s in (5, 20, 100)]
    assert get_all_checkpoints(str(tmp_path), prefix="other") == [(str(tmp_path / "other-7.index"), 7)]
    assert load_chkpt_vars(found[0][0])["x"].shape == (1,)  # the listed paths load
