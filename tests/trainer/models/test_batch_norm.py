"""BatchNorm as the reference's: variables, statistics, the EMA rule, update modes, towers, errors."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from towerpack.trainer import BatchNorm, PredictTowerContext, TrainTowerContext
from towerpack.trainer.compat import tf, tfv1

RNG = np.random.RandomState(1)
X4 = (RNG.normal(size=(4, 3, 3, 2)) * [1.0, 3.0] + [2.0, -1.0]).astype(np.float32)
X2 = (RNG.normal(size=(6, 3)) * 2 + 1).astype(np.float32)


def _session():
    sess = tfv1.Session()
    sess.run(tfv1.global_variables_initializer())
    return sess


def _var(name):
    return next(v for v in tfv1.global_variables() + tfv1.local_variables() if v.op.name == name)


def _normalized(x, axes, ddof=0):
    return (x - x.mean(axes)) / np.sqrt(x.var(axes, ddof=ddof) + 1e-5)


def test_variables_statistics_and_the_ema_rule(graph):
    with TrainTowerContext(""):
        y4 = BatchNorm("bn4", tf.constant(X4), momentum=0.8)
        y2 = BatchNorm("bn2", tf.constant(X2))
    names = sorted(v.op.name for v in tfv1.global_variables())
    assert names == sorted(
        f"{s}/{n}" for s in ("bn2", "bn4") for n in ("beta", "gamma", "mean/EMA", "variance/EMA")
    )
    assert sorted(v.op.name for v in tfv1.trainable_variables()) == [
        "bn2/beta",
        "bn2/gamma",
        "bn4/beta",
        "bn4/gamma",
    ]
    updates = tfv1.get_collection(tfv1.GraphKeys.UPDATE_OPS)
    assert sorted(op.name for op in updates) == [
        f"{s}/{k}_ema_op" for s in ("bn2", "bn4") for k in ("mean", "var")
    ]
    with _session() as sess:
        got4, got2 = sess.run([y4, y2])
        sess.run(updates)
        mean4, var4, mean2, var2 = sess.run(
            [_var(n) for n in ("bn4/mean/EMA", "bn4/variance/EMA", "bn2/mean/EMA", "bn2/variance/EMA")]
        )
    np.testing.assert_allclose(got4, _normalized(X4, (0, 1, 2)), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got2, _normalized(X2, 0), rtol=1e-4, atol=1e-4)
    # ema <- ema - (1 - momentum) * (ema - stat), from 0 (mean) and 1 (variance). The fused 4-D
    # kernel's moving variance follows the unbiased batch variance, as the reference's did.
    np.testing.assert_allclose(mean4, 0.2 * X4.mean((0, 1, 2)), rtol=1e-5)
    np.testing.assert_allclose(var4, 0.8 + 0.2 * X4.var((0, 1, 2), ddof=1), rtol=1e-5)
    np.testing.assert_allclose(mean2, 0.1 * X2.mean(0), rtol=1e-5)
    np.testing.assert_allclose(var2, 0.9 + 0.1 * X2.var(0), rtol=1e-5)


def test_inference_uses_the_moving_averages(graph):
    with TrainTowerContext(""):
        BatchNorm("bn", tf.constant(X4))
    with tfv1.variable_scope(tfv1.get_variable_scope(), reuse=True), PredictTowerContext("pred"):
        y = BatchNorm("bn", tf.constant(X4), gamma_init=tfv1.ones_initializer())
    with _session() as sess:
        _var("bn/mean/EMA").load([1.0, 2.0], sess)
        _var("bn/variance/EMA").load([4.0, 9.0], sess)
        got = sess.run(y)
    np.testing.assert_allclose(got, (X4 - [1.0, 2.0]) / np.sqrt(np.array([4.0, 9.0]) + 1e-5), rtol=1e-5)


@pytest.mark.parametrize("mode", ["internal", "skip", "collection"])
def test_ema_update_modes(graph, mode):
    with TrainTowerContext(""):
        y = BatchNorm("bn", tf.constant(X2), ema_update=mode)
    in_collection = tfv1.get_collection(tfv1.GraphKeys.UPDATE_OPS)
    assert len(in_collection) == (2 if mode == "collection" else 0)
    with _session() as sess:
        sess.run(y)
        moved = not np.allclose(sess.run(_var("bn/mean/EMA")), 0)
    assert moved == (mode == "internal")


def test_only_the_main_training_tower_updates(graph):
    for k in range(2):
        with (
            TrainTowerContext(f"tower{k}", index=k, total=2),
            tfv1.variable_scope(tfv1.get_variable_scope(), reuse=k > 0),
        ):
            BatchNorm("bn", tf.constant(X2), ema_update="collection")
    assert [op.name for op in tfv1.get_collection(tfv1.GraphKeys.UPDATE_OPS)] == [
        "tower0/bn/mean_ema_op",
        "tower0/bn/var_ema_op",
    ]


def test_frozen_batch_norm_in_a_training_tower(graph, caplog):
    x = tf.constant(X2)
    with TrainTowerContext(""), caplog.at_level(logging.WARNING, logger="towerpack.trainer"):
        y = BatchNorm("bn", x, use_local_stat=False, ema_update="internal")
        BatchNorm("bn2", x, training=False)
    assert caplog.text.count("training=False in a training tower") == 2
    loss = tf.reduce_sum(y * tf.constant(RNG.normal(size=X2.shape).astype(np.float32)))
    grads = tf.gradients(loss, [_var("bn/gamma"), _var("bn/beta")])
    with _session() as sess:
        got, g = sess.run([y, grads])
        assert np.allclose(sess.run(_var("bn/mean/EMA")), 0)  # not updated
    np.testing.assert_allclose(got, X2 / np.sqrt(1 + 1e-5), rtol=1e-5)  # mean 0, variance 1
    assert all(np.abs(v).sum() > 0 for v in g)


@pytest.mark.data_format
def test_channels_first_equals_channels_last(graph):
    with TrainTowerContext(""):
        last = BatchNorm("a", tf.constant(X4), data_format="NHWC")
        first = BatchNorm("b", tf.transpose(tf.constant(X4), [0, 3, 1, 2]), data_format="channels_first")
    assert _var("b/gamma").shape.as_list() == [2]
    with _session() as sess:
        a, b = sess.run([last, first])
    np.testing.assert_allclose(a, b.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-6)


def test_virtual_batch_normalizes_each_group_by_its_own_statistics(graph):
    with TrainTowerContext(""):
        y = BatchNorm("bn", tf.constant(X4), virtual_batch_size=2, ema_update="internal")
    with _session() as sess:
        got = sess.run(y)
        mean = sess.run(_var("bn/mean/EMA"))
    for g in range(2):
        part = X4[2 * g : 2 * g + 2]
        np.testing.assert_allclose(got[2 * g : 2 * g + 2], _normalized(part, (0, 1, 2)), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(mean, 0.1 * X4[:2].mean((0, 1, 2)), rtol=1e-5)  # the first group


def test_single_tower_sync_uses_local_statistics(graph, caplog):
    with TrainTowerContext(""), caplog.at_level(logging.WARNING, logger="towerpack.trainer"):
        synced = BatchNorm("s", tf.constant(X4), sync_statistics="nccl")
        plain = BatchNorm("p", tf.constant(X4))
    assert "single tower" in caplog.text
    with _session() as sess:
        a, b = sess.run([synced, plain])
        # Synchronized statistics always update internally, with the biased variance.
        np.testing.assert_allclose(sess.run(_var("s/variance/EMA")), 0.9 + 0.1 * X4.var((0, 1, 2)), rtol=1e-5)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_half_precision_keeps_float32_parameters(graph):
    with TrainTowerContext(""):
        y = BatchNorm("bn", tf.constant(X4.astype(np.float16)))
    assert y.dtype == tf.float16 and _var("bn/gamma").dtype.base_dtype == tf.float32
    with _session() as sess:
        np.testing.assert_allclose(sess.run(y), _normalized(X4, (0, 1, 2)), rtol=2e-2, atol=2e-2)


def test_bad_arguments(graph):
    with pytest.raises(RuntimeError, match="needs a TowerContext"):
        BatchNorm("a", tf.constant(X2))
    with TrainTowerContext(""):
        for kwargs, error, match in [
            ({"ema_update": "sometimes"}, ValueError, "ema_update must be"),
            ({"sync_statistics": "mpi"}, ValueError, "sync_statistics must be"),
            ({"sync_statistics": "nccl", "virtual_batch_size": 2}, ValueError, "cannot combine"),
            ({"axis": 2}, ValueError, "channel axis"),
            ({"training": tf.constant(True)}, TypeError, "Python bool"),
        ]:
            with pytest.raises(error, match=match):
                BatchNorm(f"bn{len(kwargs)}{match[:3]}", tf.constant(X4), **kwargs)
        with pytest.raises(ValueError, match="2-D or 4-D"):
            BatchNorm("r3", tf.ones([2, 3, 4]))
        with pytest.raises(TypeError, match="positional"):
            BatchNorm("pos", tf.constant(X2), 1)
