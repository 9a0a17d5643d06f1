"""Graph utilities: session config, environment report, summaries (read back from TensorBoard
event files), scopes, variable replacement, dependencies, collections."""

from __future__ import annotations

import glob
import logging

import numpy as np
import pytest

from support.trainer_models import ArrayBatches, blobs
from towerpack.trainer import ModelDesc, SimpleTrainer, TrainConfig, launch_train_with_config
from towerpack.trainer.collection import backup_collection, freeze_collection, restore_collection
from towerpack.trainer.common import collect_env_info, get_default_sess_config
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.dependency import dependency_of_fetches, dependency_of_targets
from towerpack.trainer.scope_utils import (
    auto_reuse_variable_scope,
    cached_name_scope,
    under_name_scope,
    under_variable_scope,
)
from towerpack.trainer.summary import add_activation_summary, add_param_summary, add_tensor_summary
from towerpack.trainer.tower import PredictTowerContext, TrainTowerContext
from towerpack.trainer.varreplace import custom_getter_scope, freeze_variables, remap_variables

pytestmark = pytest.mark.usefixtures("graph")


def test_default_sess_config_is_the_references():
    config = get_default_sess_config(0.5)
    assert config.allow_soft_placement
    assert (config.intra_op_parallelism_threads, config.inter_op_parallelism_threads) == (1, 0)
    assert config.gpu_options.per_process_gpu_memory_fraction == 0.5
    assert config.gpu_options.allow_growth
    with tfv1.Session(config=config) as sess:  # a session accepts it
        assert sess.run(tf.constant(3)) == 3


def test_collect_env_info_names_the_versions():
    info = collect_env_info()
    lines = dict(line.split(None, 1) for line in info.splitlines() if not line.startswith(("TF ", "sys.")))
    assert tf.__version__ in lines["TensorFlow"]
    assert lines["numpy"] == np.__version__
    assert "towerpack-trainer" in lines and "GPUs" in lines


class SummarizedModel(ModelDesc):
    def inputs(self):
        return [tf.TensorSpec([None, 8], tf.float32, "x"), tf.TensorSpec([None], tf.int32, "label")]

    def build_graph(self, x, label):
        w = tfv1.get_variable("fc/W", [8, 3], initializer=tfv1.ones_initializer())
        b = tfv1.get_variable("fc/b", [3], initializer=tfv1.zeros_initializer())
        hidden = tf.nn.relu(tf.matmul(x, w) + b, name="hidden")
        add_activation_summary(hidden)
        add_activation_summary(tf.reduce_mean(hidden))  # rank 0: skipped with a warning
        add_tensor_summary(x, ["mean", "sparsity"], name="input")
        add_param_summary(("fc/W", ["histogram", "rms"]), (".*/b", ["mean"]), ("W", ["scalar"]))
        cost = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=hidden), name="cost"
        )
        add_tensor_summary(cost, ["scalar"])
        return cost

    def optimizer(self):
        return tfv1.train.GradientDescentOptimizer(0.01)


def test_summary_tags_in_the_event_file_follow_the_reference(logdir, caplog):
    x, label = blobs(64)
    x = np.abs(x).mean(axis=1, keepdims=True) * np.ones((1, 8), np.float32)  # all positive
    with caplog.at_level(logging.WARNING, logger="towerpack.trainer"):
        config = TrainConfig(
            model=SummarizedModel(), dataflow=ArrayBatches(x, label, batch_size=32), max_epoch=1
        )
        launch_train_with_config(config, SimpleTrainer())
    assert "Cannot summarize scalar activation Mean:0" in caplog.text
    tags = {}
    for path in glob.glob(str(logdir / "events.out.tfevents.*")):
        for event in tfv1.train.summary_iterator(path):
            for value in event.summary.value:
                tags[value.tag] = value
    expected = {
        "activation-summary/hidden-sparsity",
        "activation-summary/hidden-rms",
        "activation-summary/hidden-histogram",
        "input-mean",
        "input-sparsity",
        "cost",  # "cost-summary": the monitors drop the "-summary" suffix, as the reference's did
        "param-summary/fc/W-histogram",
        "param-summary/fc/W-rms",
        "param-summary/fc/b-mean",
    }
    assert expected <= set(tags), sorted(tags)
    assert not [t for t in tags if "W-summary" in t]  # "W" does not match "fc/W" in full
    assert tags["param-summary/fc/W-rms"].simple_value == pytest.approx(1.0, abs=0.05)
    assert tags["input-sparsity"].simple_value == 0.0
    assert tags["activation-summary/hidden-histogram"].HasField("histo")


def test_summaries_only_from_the_main_training_tower_and_unknown_types():
    x = tf.ones([2, 2], name="x")
    with TrainTowerContext("tower1", index=1, total=2):
        add_tensor_summary(x, ["scalar"])
    with PredictTowerContext("pred"):
        add_activation_summary(x)
    assert tfv1.get_collection(tfv1.GraphKeys.SUMMARIES) == []
    with pytest.raises(KeyError, match="unknown summary type"):
        add_tensor_summary(x, ["median"])
    add_tensor_summary(x, ["histogram"], collections=["mine"])
    assert [s.op.name for s in tfv1.get_collection("mine")] == ["x-histogram"]


def test_auto_reuse_variable_scope_shares_variables_per_scope():
    @auto_reuse_variable_scope
    def layer(x):
        return x * tfv1.get_variable("W", [], initializer=tfv1.ones_initializer())

    with tfv1.variable_scope("a"):
        layer(1.0)
        layer(2.0)
    with tfv1.variable_scope("b"):
        layer(3.0)
    assert [v.op.name for v in tfv1.global_variables()] == ["a/W", "b/W"]
    with tf.Graph().as_default():  # a new graph starts afresh
        with tfv1.variable_scope("a"):
            layer(1.0)
        assert [v.op.name for v in tfv1.global_variables()] == ["a/W"]


def test_under_name_scope_and_variable_scope(caplog):
    @under_name_scope()
    def rms(x):
        return tf.sqrt(tf.reduce_mean(tf.square(x)), name="out")

    @under_name_scope("custom")
    def named(x):
        return tf.identity(x, name="out")

    @under_variable_scope()
    def block(x):
        return x * tfv1.get_variable("W", [], initializer=tfv1.ones_initializer())

    x = tf.ones([3])
    assert rms(x).op.name == "rms/out"
    assert rms(x).op.name == "rms_1/out"  # a fresh scope per call
    assert named(x).op.name == "custom/out"
    with tf.name_scope("outer"):
        first = rms(x, name_scope="stat")
        second = rms(x, name_scope="stat")  # re-entered, not stat_1
    assert first.op.name == "outer/stat/out" and second.op.name == "outer/stat/out_1"
    tf.identity(x, name="taken")
    with caplog.at_level(logging.WARNING, logger="towerpack.trainer"):
        assert rms(x, name_scope="taken").op.name == "taken_1/out"
    assert "name_scope='taken', but the name scope became 'taken_1'" in caplog.text
    block(x)
    assert [v.op.name for v in tfv1.global_variables()] == ["block/W"]


def test_cached_name_scope_is_reentered():
    with cached_name_scope("summaries") as scope:
        a = tf.identity(1.0, name="a")
    with tf.name_scope("elsewhere"), cached_name_scope("summaries") as again:
        b = tf.identity(1.0, name="b")
    assert scope == again == "summaries/"
    assert (a.op.name, b.op.name) == ("summaries/a", "summaries/b")
    with tf.name_scope("elsewhere"), cached_name_scope("inner", top_level=False) as inner:
        assert inner == "elsewhere_1/inner/"


def test_remap_and_custom_getter():
    calls = []

    def getter(getter, *args, **kwargs):
        calls.append(kwargs["name"])
        return getter(*args, **kwargs)

    with tfv1.variable_scope("net"), custom_getter_scope(getter):
        tfv1.get_variable("W", [], initializer=tfv1.ones_initializer())
        with remap_variables(lambda v: v * 3.0):
            tripled = tfv1.get_variable("b", [], initializer=tfv1.ones_initializer())
        assert tf.identity(1.0).op.name == "net/Identity"  # no new name scope
    assert calls == ["net/W", "net/b"]
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        assert sess.run(tripled) == 3.0


def test_freeze_variables():
    with freeze_variables(stop_gradient=True):
        frozen = tfv1.get_variable("frozen", [], initializer=tfv1.ones_initializer())
    with freeze_variables(stop_gradient=False, skip_collection=True):
        fixed = tfv1.get_variable("fixed", [], initializer=tfv1.ones_initializer())
        stat = tfv1.get_variable("stat", [], trainable=False, initializer=tfv1.ones_initializer())
    free = tfv1.get_variable("free", [], initializer=tfv1.ones_initializer())
    assert frozen.op.name == "freezed_frozen"
    cost = frozen * 2.0 + fixed * 3.0 + free * 4.0
    grads = dict(
        zip(["frozen", "free"], tf.gradients(cost, [tfv1.trainable_variables()[0], free]), strict=True)
    )
    assert grads["frozen"] is None and grads["free"] is not None
    assert [v.op.name for v in tfv1.trainable_variables()] == ["frozen", "free"]
    assert [v.op.name for v in tfv1.get_collection(tfv1.GraphKeys.MODEL_VARIABLES)] == ["fixed"]
    assert stat not in tfv1.get_collection(tfv1.GraphKeys.MODEL_VARIABLES)


def test_dependency_of_targets_and_fetches():
    a = tf.constant(1.0, name="a")
    b = tf.identity(a, name="b")
    c = tf.constant(2.0, name="c")
    with tf.control_dependencies([c]):
        d = tf.identity(b, name="d")
    e = tf.constant(3.0, name="e")
    assert dependency_of_targets((d,), a) and dependency_of_targets((d.op,), c.op)
    assert not dependency_of_targets((d,), e)
    assert dependency_of_fetches({"out": [d], "other": (e,)}, c)
    assert dependency_of_fetches(["d:0"], a)
    assert not dependency_of_fetches([b, e], c)


def test_collections_backup_restore_freeze():
    tfv1.add_to_collection("mine", 1)
    saved = backup_collection(["mine"])
    tfv1.add_to_collection("mine", 2)
    restore_collection(saved)
    assert tfv1.get_collection("mine") == [1]
    with freeze_collection(["mine", tfv1.GraphKeys.UPDATE_OPS]):
        tfv1.add_to_collection("mine", 3)
        tfv1.add_to_collection(tfv1.GraphKeys.UPDATE_OPS, tf.no_op())
    assert tfv1.get_collection("mine") == [1]
    assert tfv1.get_collection(tfv1.GraphKeys.UPDATE_OPS) == []
