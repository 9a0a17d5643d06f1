"""Gradient processors and optimizer wrappers in real graphs and sessions; AccumGradOptimizer's
equivalence with a larger batch, also under the multi-device trainers."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from support.dist_models import FetchVariables, RankSlices, Regression64, regression_data
from towerpack.trainer import (
    QueueInput,
    SimpleTrainer,
    SyncMultiGPUTrainerParameterServer,
    SyncMultiGPUTrainerReplicated,
    TrainConfig,
    launch_train_with_config,
)
from towerpack.trainer.common import get_global_step_var
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.gradproc import (
    CheckGradient,
    FilterNoneGrad,
    GlobalNormClip,
    MapGradient,
    PrintGradient,
    ScaleGradient,
    SummaryGradient,
)
from towerpack.trainer.optimizer import (
    AccumGradOptimizer,
    PostProcessOptimizer,
    ProxyOptimizer,
    VariableAssignmentOptimizer,
    apply_grad_processors,
)
from towerpack.trainer.tower import MOVING_SUMMARY_OPS

pytestmark = pytest.mark.usefixtures("graph")

BATCH = 4


def _vars_and_grads():
    """``a`` [3] and ``b`` [2] with constant gradients (1, 2, 2) and (4, 0); ``c`` gets none."""
    a = tfv1.get_variable("a", initializer=np.zeros(3, np.float32))
    b = tfv1.get_variable("scope/b", initializer=np.zeros(2, np.float32))
    c = tfv1.get_variable("c", initializer=np.zeros(1, np.float32))
    grads = [(tf.constant([1.0, 2.0, 2.0]), a), (tf.constant([4.0, 0.0]), b), (None, c)]
    return grads, (a, b, c)


def _run(tensors):
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        return sess.run(tensors)


def test_filter_none_grad_drops_and_names_them_once(caplog):
    grads, (a, b, _) = _vars_and_grads()
    with caplog.at_level(logging.WARNING, logger="towerpack.trainer"):
        kept = FilterNoneGrad().process(grads)
    assert [v for _, v in kept] == [a, b]
    assert [r.getMessage() for r in caplog.records] == ["No gradient w.r.t 1 trainable variables: c"]
    caplog.clear()
    FilterNoneGrad(verbose=False).process(grads)
    assert not caplog.records


def test_global_norm_clip_scales_all_gradients_together():
    with_none, _ = _vars_and_grads()
    grads = FilterNoneGrad(verbose=False).process(with_none)  # norm of (1, 2, 2, 4, 0) is 5
    clipped = _run([g for g, _ in GlobalNormClip(2.5).process(grads)])
    np.testing.assert_allclose(clipped[0], [0.5, 1, 1], rtol=1e-6)
    np.testing.assert_allclose(clipped[1], [2, 0], rtol=1e-6)
    unchanged = _run([g for g, _ in GlobalNormClip(10).process(grads)])
    np.testing.assert_allclose(unchanged[0], [1, 2, 2])
    with pytest.raises(ValueError, match="FilterNoneGrad"):
        GlobalNormClip(1).process(with_none)


def test_map_gradient_matches_full_names_takes_one_or_two_arguments_and_drops_none(caplog):
    grads, (a, _, _) = _vars_and_grads()
    grads = grads[:2]
    doubled = MapGradient(lambda g: g * 2, regex="a").process(grads)
    assert _run(doubled[0][0]).tolist() == [2, 4, 4]
    assert doubled[1][0] is grads[1][0]  # "a" matches only the whole name "a", not "scope/b"
    by_var = MapGradient(lambda g, v: g + tf.cast(tf.size(v), g.dtype), regex=".*/b").process(grads)
    assert _run(by_var[1][0]).tolist() == [6, 2]
    dropped = MapGradient(lambda g: None, regex="scope/.*").process(grads)
    assert [v for _, v in dropped] == [a]
    with caplog.at_level(logging.WARNING, logger="towerpack.trainer"):
        MapGradient(lambda g: g, regex="nothing").process(grads)
    assert "No match was found for regex nothing" in caplog.text
    with pytest.raises(ValueError, match="1 argument"):
        MapGradient(lambda g, v, x: g)


def test_scale_gradient_first_match_wins_zero_drops():
    grads, (a, _, _) = _vars_and_grads()
    out = ScaleGradient([("scope/.*", 0.5), (".*", 3.0)], verbose=False).process(grads[:2])
    values = _run([g for g, _ in out])
    np.testing.assert_allclose(values[0], [3, 6, 6])
    np.testing.assert_allclose(values[1], [2, 0])
    only_a = ScaleGradient(("scope/b", 0), verbose=False).process(grads[:2])
    assert [v for _, v in only_a] == [a]
    with pytest.raises(TypeError, match="verbose must be a bool"):
        ScaleGradient(("a", 2), verbose=1)
    # Sparse gradients (an embedding lookup) are scaled too.
    emb = tfv1.get_variable("emb", initializer=np.ones((4, 2), np.float32))
    ((sparse, _),) = tfv1.train.GradientDescentOptimizer(1.0).compute_gradients(
        tf.reduce_sum(tf.gather(emb, [1, 3])), [emb]
    )
    ((scaled, _),) = ScaleGradient(("emb", 2.0), verbose=False).process([(sparse, emb)])
    assert isinstance(scaled, tf.IndexedSlices)
    np.testing.assert_allclose(_run(tf.convert_to_tensor(scaled)), [[0, 0], [2, 2], [0, 0], [2, 2]])


def test_summary_gradient_once_per_variable_with_moving_rms():
    grads, _ = _vars_and_grads()
    grads = grads[:2]
    proc = SummaryGradient()
    proc.process(grads)
    proc.process(grads)  # a second call adds nothing
    replica = tfv1.get_variable("tower1/a", initializer=np.zeros(3, np.float32))
    SummaryGradient().process([(tf.constant([1.0, 1.0, 1.0]), replica)])
    summary = tfv1.summary.merge_all()
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        sess.run(tfv1.get_collection(MOVING_SUMMARY_OPS))
        parsed = tfv1.Summary.FromString(sess.run(summary))
    tags = {v.tag: v for v in parsed.value}
    assert sorted(tags) == [
        "SummaryGradient/a-grad",
        "SummaryGradient/a/rms-summary",
        "SummaryGradient/scope/b-grad",
        "SummaryGradient/scope/b/rms-summary",
    ]
    assert tags["SummaryGradient/a/rms-summary"].simple_value == pytest.approx(np.sqrt(3.0), rel=1e-5)


def test_print_gradient_prints_each_gradient_once(capfd):
    grads, _ = _vars_and_grads()
    out = PrintGradient(regex="scope/.*").process(grads[:2])
    again = PrintGradient().process(out)
    _run([g for g, _ in again])
    err = capfd.readouterr().err
    assert "scope/b-grad [2] 2 2.82842" in err
    assert "[4 0]" in err
    assert err.count("-grad") == 2  # scope/b once (already printed), a once


def test_check_gradient_fails_the_step_on_nan():
    a = tfv1.get_variable("a", initializer=np.zeros(2, np.float32))
    bad = [(tf.constant([1.0, np.nan]), a)]
    ((checked, _),) = CheckGradient().process(bad)
    with pytest.raises(tf.errors.InvalidArgumentError, match="CheckGradient/a"):
        _run(checked)


def test_apply_grad_processors_and_post_processing_in_a_training_step():
    w = tfv1.get_variable("w", initializer=np.zeros(2, np.float32))
    cost = tf.reduce_sum(w * tf.constant([3.0, 4.0]))  # gradient (3, 4), norm 5
    sgd = tfv1.train.GradientDescentOptimizer(1.0)
    opt = apply_grad_processors(sgd, [GlobalNormClip(1.0), ScaleGradient(("w", 2.0), verbose=False)])
    opt = VariableAssignmentOptimizer(opt, lambda v: tf.clip_by_value(v, -1.0, 0.0))
    counter = tfv1.get_variable("posts", initializer=0, trainable=False)
    opt = PostProcessOptimizer(opt, lambda v: counter.assign_add(1).op)
    step = opt.minimize(cost, name="train_op")
    assert step.name == "train_op"
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        sess.run(step)
        # Clipped to norm 1 (0.6, 0.8), doubled, applied: (-1.2, -1.6), then clipped to [-1, 0].
        np.testing.assert_allclose(sess.run(w), [-1.0, -1.0])
        assert sess.run(counter) == 1
    with pytest.raises(TypeError, match="GradientProcessors"):
        apply_grad_processors(sgd, [lambda g: g])
    with pytest.raises(TypeError, match="list of GradientProcessors"):
        apply_grad_processors(sgd, GlobalNormClip(1.0))


def test_proxy_optimizer_forwards_slots():
    w = tfv1.get_variable("w", initializer=np.zeros(2, np.float32))
    inner = tfv1.train.MomentumOptimizer(0.1, 0.9)
    proxy = ProxyOptimizer(inner)
    proxy.minimize(tf.reduce_sum(w))
    assert proxy.get_slot_names() == ["momentum"]
    assert proxy.get_slot(w, "momentum").op.name == "w/Momentum"
    with pytest.raises(TypeError, match=r"tf\.compat\.v1\.train\.Optimizer"):
        ProxyOptimizer(object())


def test_accum_grad_applies_the_sum_every_niter_calls_sparse_and_dense():
    emb = tfv1.get_variable("emb", initializer=np.zeros((3, 2), np.float32))
    w = tfv1.get_variable("w", initializer=np.zeros(2, np.float32))
    ids = tfv1.placeholder(tf.int32, [None])
    scale = tfv1.placeholder(tf.float32, [])
    cost = scale * (tf.reduce_sum(tf.gather(emb, ids)) + tf.reduce_sum(w))
    gs = get_global_step_var()
    step = AccumGradOptimizer(tfv1.train.GradientDescentOptimizer(1.0), 3).minimize(cost, global_step=gs)
    names = {v.op.name for v in tfv1.global_variables()}
    assert {"emb/AccumGrad", "w/AccumGrad", "AccumGrad/counter"} <= names
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        for k, (i, s) in enumerate([([0], 1.0), ([2, 2], 2.0), ([1], 4.0)]):
            np.testing.assert_array_equal(sess.run(w), [0, 0])  # nothing applied before the 3rd call
            sess.run(step, {ids: i, scale: s})
            assert sess.run(gs) == k + 1
        np.testing.assert_allclose(sess.run(w), [-7, -7])  # the sum of 1 + 2 + 4
        np.testing.assert_allclose(sess.run(emb), [[-1, -1], [-4, -4], [-4, -4]])
        (slot,) = [v for v in tfv1.global_variables() if v.op.name == "w/AccumGrad"]
        np.testing.assert_array_equal(sess.run(slot), [0, 0])  # cleared after applying
    with pytest.raises(ValueError, match="positive integer"):
        AccumGradOptimizer(tfv1.train.GradientDescentOptimizer(1.0), 0)


class AccumRegression64(Regression64):
    def __init__(self, niter: int, lr: float, average: bool):
        super().__init__(lr=lr)
        self.niter, self.average = niter, average

    def optimizer(self):
        return AccumGradOptimizer(super().optimizer(), self.niter, average=self.average)


def _train(trainer, model, data, steps_per_epoch: int, fetch_all: bool = False) -> dict:
    out: dict = {}

    class Fetch(FetchVariables):
        def _after_train(self):
            for v in tfv1.global_variables() + tfv1.local_variables():
                self.out[v.op.name] = self.trainer.sess.run(v)

    with tf.Graph().as_default():
        config = TrainConfig(
            model=model,
            data=data,
            callbacks=[Fetch(out)],
            monitors=[],
            extra_callbacks=[],
            max_epoch=1,
            steps_per_epoch=steps_per_epoch,
        )
        launch_train_with_config(config, trainer)
    return out


def _reference(batch: int, lr: float) -> dict:
    x, y = regression_data()
    return _train(SimpleTrainer(), Regression64(lr=lr), QueueInput(RankSlices(x, y, batch)), 96 // batch)


@pytest.mark.parametrize("average", [False, True], ids=["sum", "average"])
def test_accum_grad_k_steps_at_batch_b_equal_one_step_at_batch_kb(average):
    """Summed: the larger batch with k times the learning rate; averaged: the same learning rate."""
    k, lr = 3, 1 / 32  # k * lr is exact in float32, the optimizer's learning-rate type
    x, y = regression_data()
    got = _train(
        SimpleTrainer(), AccumRegression64(k, lr, average), QueueInput(RankSlices(x, y, BATCH)), 96 // BATCH
    )
    expected = _reference(k * BATCH, lr if average else lr * k)
    for name in ("w", "b"):
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-10, err_msg=name)
    momentum = expected["w/Momentum"] * (1 if average else k)
    np.testing.assert_allclose(got["w/Momentum"], momentum, rtol=1e-10)
    assert got["AccumGrad/counter"] == 96 // BATCH


@pytest.mark.parametrize("kind", ["replicated", "parameter-server"])
def test_accum_grad_under_multi_device_trainers(kind):
    """2 towers at batch b, accumulated over 2 steps, train like one tower at batch 4b. The
    replicated trainer updates every replica in one apply_gradients: the counter advances once
    per step and every replica applies on the same steps."""
    towers, k, lr = 2, 2, 1 / 32
    x, y = regression_data()
    trainer = (
        SyncMultiGPUTrainerReplicated(towers, broadcast_every_epoch=False)
        if kind == "replicated"
        else SyncMultiGPUTrainerParameterServer(towers, ps_device="gpu")
    )
    steps = 96 // (towers * BATCH)
    got = _train(trainer, AccumRegression64(k, lr, average=False), QueueInput(RankSlices(x, y, BATCH)), steps)
    expected = _reference(towers * k * BATCH, lr * k)
    for name in ("w", "b"):
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-10, err_msg=name)
    assert got["AccumGrad/counter"] == steps
    if kind == "replicated":
        for name in ("w", "b", "w/AccumGrad", "w/Momentum"):
            np.testing.assert_array_equal(got[f"tower1/{name}"], got[name], err_msg=name)
