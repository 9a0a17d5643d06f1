"""Tower contexts and tower functions follow the rules of trainers-tower.txt."""

import pytest

from towerpack.trainer import (
    PredictTowerContext,
    TowerContext,
    TowerFunc,
    TrainTowerContext,
    add_moving_summary,
    get_current_tower_context,
)
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.model_desc import build_placeholders
from towerpack.trainer.tower import MOVING_SUMMARY_OPS

pytestmark = pytest.mark.usefixtures("graph")
SIG = [tf.TensorSpec([None, 3], tf.float32, "x")]


def model(x):
    w = tfv1.get_variable("w", [3, 2])
    out = tf.matmul(x, w, name="out")
    tfv1.add_to_collection(tfv1.GraphKeys.UPDATE_OPS, tf.no_op(name="update"))
    add_moving_summary(tf.reduce_mean(out, name="mean"))
    return out


def test_context_properties():
    assert get_current_tower_context() is None
    with TowerContext("", is_training=True) as ctx:
        assert get_current_tower_context() is ctx
        assert ctx.is_training and ctx.is_main_training_tower and ctx.has_own_variables
    assert get_current_tower_context() is None
    with TrainTowerContext("tower1", index=1, total=2) as ctx:
        assert not ctx.is_main_training_tower and not ctx.has_own_variables
        assert tfv1.get_default_graph().get_name_scope() == "tower1"
    with TrainTowerContext("tower1", vs_name="tower1", index=1, total=2) as ctx:
        assert ctx.has_own_variables and ctx.vs_name == "tower1"
    ctx = TowerContext("pred", is_training=False)
    assert isinstance(ctx, PredictTowerContext) and not ctx.is_training


def test_towers_cannot_nest():
    with (
        TrainTowerContext(""),
        pytest.raises(RuntimeError, match="cannot be nested"),
        PredictTowerContext("p"),
    ):
        pass
    assert get_current_tower_context() is None


def test_tower_func_records_towers_and_reuses_variables():
    func = TowerFunc(model, SIG)
    assert TowerFunc(func, SIG).tower_fn is model  # not double-wrapped
    x = build_placeholders(SIG)[0]
    with TrainTowerContext("tower0", index=0, total=2):
        func(x)
    with TrainTowerContext("tower1", index=1, total=2):
        func(x)
    with tfv1.variable_scope(tfv1.get_variable_scope(), reuse=True), PredictTowerContext("pred"):
        func(x)
    assert [v.op.name for v in tfv1.trainable_variables()] == ["w"]
    towers = func.towers
    assert len(towers) == 3 and len(towers.training()) == 2 and len(towers.inference()) == 1
    assert towers["tower1"].get_tensor("out").name == "tower1/out:0"
    assert towers["pred"].get_tensor("x") is x  # inputs resolve to the tower's input tensors
    assert towers[0].get_variable("w") is towers["pred"].get_variable("w")
    # Summaries only from the main training tower; update ops not from prediction towers.
    assert len(tfv1.get_collection(MOVING_SUMMARY_OPS)) == 1
    assert len(tfv1.get_collection(tfv1.GraphKeys.SUMMARIES)) == 1
    assert len(tfv1.get_collection(tfv1.GraphKeys.UPDATE_OPS)) == 2
    assert len(towers["pred"].get_collection(tfv1.GraphKeys.UPDATE_OPS)) == 1
    with pytest.raises(KeyError, match="no tensor named 'nothing'"):
        towers[0].get_tensor("nothing")


def test_tower_without_own_variables_must_not_create_trainable_ones():
    x = build_placeholders(SIG)[0]
    with TrainTowerContext("tower0", index=0, total=2):
        model(x)
    with (
        pytest.raises(RuntimeError, match="created new trainable variable"),
        TrainTowerContext("tower1", index=1, total=2),
    ):
        tfv1.Variable(1.0, name="sneaky")


def test_tower_func_needs_a_context_and_the_right_inputs():
    func = TowerFunc(model, SIG)
    x = build_placeholders(SIG)[0]
    with pytest.raises(RuntimeError, match="under a TowerContext"):
        func(x)
    with TrainTowerContext(""), pytest.raises(TypeError, match="takes 1 inputs"):
        func(x, x)
