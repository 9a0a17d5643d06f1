"""Multi-device trainers on logical CPU devices: equivalence with SimpleTrainer at the total
batch, replica consistency, async update order, placement, update ops, checkpoints, inference."""

from __future__ import annotations

import json

import numpy as np
import pytest

from support.dist_models import DIM, FetchVariables, RankSlices, Regression64, regression_data
from towerpack.dataflow import DataFromList
from towerpack.trainer import (
    AsyncMultiGPUTrainer,
    InferenceRunner,
    JSONWriter,
    ModelDesc,
    ModelSaver,
    QueueInput,
    ScalarStats,
    SimpleTrainer,
    StagingInput,
    SyncMultiGPUTrainer,
    SyncMultiGPUTrainerParameterServer,
    SyncMultiGPUTrainerReplicated,
    TrainConfig,
    get_current_tower_context,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.graph_builder import AllReduceMode, PSDevice

RTOL = 1e-5
BATCH = 4


class Adam64(Regression64):
    def optimizer(self):
        return tfv1.train.AdamOptimizer(0.05)


class Unseeded64(Regression64):
    """Initialized without a seed: each replica starts from different random values."""

    def build_graph(self, x, y):
        w = tfv1.get_variable(
            "w", [DIM], tf.float64, initializer=tfv1.random_normal_initializer(dtype=tf.float64)
        )
        pred = tf.linalg.matvec(x, w)
        return tf.reduce_mean(tf.square(pred - y), name="cost")


def _trainer(kind: str, towers: int):
    if kind == "replicated":
        return SyncMultiGPUTrainerReplicated(towers, broadcast_every_epoch=False)
    if kind == "replicated-collective":
        return SyncMultiGPUTrainerReplicated(towers, mode="collective", broadcast_every_epoch=False)
    if kind == "ps-gpu":
        return SyncMultiGPUTrainerParameterServer(towers, ps_device="gpu")
    if kind == "ps-cpu":
        return SyncMultiGPUTrainerParameterServer(towers, ps_device="cpu")
    raise AssertionError(kind)


def _train(trainer, model, data, epochs: int = 2, callbacks=(), **kwargs):
    """Train in a fresh graph; returns every variable's final value (global and local) by name."""
    out: dict = {}
    with tf.Graph().as_default():
        config = TrainConfig(
            model=model,
            data=data,
            callbacks=[*callbacks, _FetchAll(out)],
            monitors=kwargs.pop("monitors", []),
            extra_callbacks=kwargs.pop("extra_callbacks", []),
            max_epoch=epochs,
            **kwargs,
        )
        launch_train_with_config(config, trainer)
    return out


class _FetchAll(FetchVariables):
    def _after_train(self):
        for v in tfv1.global_variables() + tfv1.local_variables():
            self.out[v.op.name] = self.trainer.sess.run(v)


def _reference(model, towers: int, epochs: int = 2) -> dict:
    x, y = regression_data()
    return _train(SimpleTrainer(), model, QueueInput(RankSlices(x, y, BATCH * towers)), epochs)


@pytest.mark.parametrize("towers", [2, 4])
@pytest.mark.parametrize("kind", ["replicated", "replicated-collective", "ps-gpu", "ps-cpu"])
def test_sync_trainers_match_simple_trainer_at_the_total_batch(kind, towers):
    x, y = regression_data()
    expected = _reference(Regression64(), towers)
    steps = len(RankSlices(x, y, BATCH * towers))  # each step takes one batch per tower
    got = _train(
        _trainer(kind, towers), Regression64(), QueueInput(RankSlices(x, y, BATCH)), steps_per_epoch=steps
    )
    for name in ("w", "b", "w/Momentum", "b/Momentum"):
        np.testing.assert_allclose(got[name], expected[name], rtol=RTOL, err_msg=name)
    assert np.all(got["w/Momentum"] != 0)  # it trained
    if kind.startswith("replicated"):
        # No re-sync between epochs: the replicas stayed identical through the all-reduce alone.
        for k in range(1, towers):
            for name in ("w", "b", "w/Momentum"):
                np.testing.assert_array_equal(got[f"tower{k}/{name}"], got[name], err_msg=f"tower{k}/{name}")


def test_replicated_with_adam_and_staging_matches_simple_trainer():
    """Adam's step counters advance once per step, not once per tower; StagingInput per device."""
    x, y = regression_data()
    expected = _reference(Adam64(), 2)
    got = _train(
        SyncMultiGPUTrainerReplicated(2, broadcast_every_epoch=False),
        Adam64(),
        StagingInput(QueueInput(RankSlices(x, y, BATCH))),
        steps_per_epoch=len(RankSlices(x, y, BATCH * 2)),
    )
    for name in ("w", "b", "w/Adam", "w/Adam_1", "beta1_power", "beta2_power"):
        np.testing.assert_allclose(got[name], expected[name], rtol=RTOL, err_msg=name)


def test_replicas_start_from_tower_zero_values():
    """Unseeded replicas start different; the post-init copy makes them equal before step 1."""
    x, y = regression_data()
    trainer = SyncMultiGPUTrainerReplicated(3, broadcast_every_epoch=False)
    got = _train(trainer, Unseeded64(), QueueInput(RankSlices(x, y, BATCH)), epochs=1, steps_per_epoch=3)
    for k in (1, 2):
        np.testing.assert_array_equal(got[f"tower{k}/w"], got["w"])


@pytest.mark.parametrize("scale_gradient", [True, False])
def test_async_trainer_applies_each_tower_update(scale_gradient):
    """With a gradient that does not depend on the weights, the result is exactly the sum of every
    tower's (scaled) update, whatever order the towers ran in."""

    class LinearCost(ModelDesc):
        def inputs(self):
            return [tf.TensorSpec([None, DIM], tf.float64, "x"), tf.TensorSpec([None], tf.float64, "y")]

        def build_graph(self, x, y):
            w = tfv1.get_variable("w", [DIM], tf.float64, initializer=tfv1.ones_initializer())
            return tf.reduce_mean(tf.linalg.matvec(x, w) * y, name="cost")

        def optimizer(self):
            return tfv1.train.GradientDescentOptimizer(0.25)  # exact in float32, as TF holds it

    x, y = regression_data()
    towers, steps = 2, 6
    got = _train(
        AsyncMultiGPUTrainer(towers, scale_gradient=scale_gradient),
        LinearCost(),
        QueueInput(RankSlices(x, y, BATCH)),
        epochs=1,
        steps_per_epoch=steps,
    )
    used = towers * steps * BATCH
    grads = [(x[i : i + BATCH] * y[i : i + BATCH, None]).mean(axis=0) for i in range(0, used, BATCH)]
    scale = 1.0 / towers if scale_gradient else 1.0
    expected = np.ones(DIM) - 0.25 * scale * np.sum(grads, axis=0)
    np.testing.assert_allclose(got["w"], expected, rtol=1e-12)


def test_parameter_server_spreads_variables_by_size_over_the_devices():
    sizes = [400, 300, 200, 100, 100, 50]

    class Wide(ModelDesc):
        def inputs(self):
            return [tf.TensorSpec([None, 1], tf.float32, "x")]

        def build_graph(self, x):
            total = 0.0
            for i, n in enumerate(sizes):
                v = tfv1.get_variable(f"v{i}", [n], initializer=tfv1.ones_initializer())
                total += tf.reduce_sum(v) * tf.reduce_mean(x)
            return tf.identity(total, name="cost")

        def optimizer(self):
            return tfv1.train.GradientDescentOptimizer(0.0)

    def placement(ps_device):
        trainer = SyncMultiGPUTrainerParameterServer(4, ps_device=ps_device)
        with tf.Graph().as_default():
            data = QueueInput(DataFromList([[np.ones((2, 1), np.float32)]] * 8, shuffle=False))
            launch_train_with_config(
                TrainConfig(
                    model=Wide(), data=data, max_epoch=1, steps_per_epoch=1, monitors=[], extra_callbacks=[]
                ),
                trainer,
            )
            return {v.op.name: v.device for v in tfv1.trainable_variables()}

    spread = placement("gpu")
    load: dict = {}
    for i, n in enumerate(sizes):
        load[spread[f"v{i}"]] = load.get(spread[f"v{i}"], 0) + n
    # Greedy least-loaded in creation order: 400, 300, 200, 100 each get a device; the second
    # 100 joins the first (100 -> 200), and 50 the lightest of 200/200 (-> 250).
    assert sorted(load.values()) == [200, 250, 300, 400]
    assert len(load) == 4
    assert set(placement("cpu").values()) == {"/device:CPU:0"}


class _UpdateOpsModel(Regression64):
    """Batch-norm style: the main tower keeps a moving mean of its inputs and counts its updates."""

    def build_graph(self, x, y):
        cost = super().build_graph(x, y)
        ema = tfv1.get_variable("ema", [], tf.float64, initializer=tfv1.zeros_initializer(), trainable=False)
        count = tfv1.get_variable(
            "count", [], tf.int64, initializer=tfv1.zeros_initializer(), trainable=False
        )
        if get_current_tower_context().is_main_training_tower:
            tfv1.add_to_collection(tfv1.GraphKeys.UPDATE_OPS, ema.assign(0.9 * ema + 0.1 * tf.reduce_mean(x)))
            tfv1.add_to_collection(tfv1.GraphKeys.UPDATE_OPS, count.assign_add(1))
        return cost


@pytest.mark.parametrize("kind", ["replicated", "ps", "async"])
def test_update_ops_run_once_per_step_under_every_trainer(kind):

    trainer = {
        "replicated": SyncMultiGPUTrainerReplicated(2),
        "ps": SyncMultiGPUTrainer(2),
        "async": AsyncMultiGPUTrainer(2),
    }[kind]
    got = _train_update_ops_model(trainer)
    assert got["count"] == 10
    assert got["ema"] != 0
    if kind == "replicated":
        # The per-epoch re-sync carries tower 0's statistics to the replica.
        assert got["tower1/ema"] == got["ema"] and got["tower1/count"] == 10


def _train_update_ops_model(trainer):
    """Two epochs of 5 steps of ``_UpdateOpsModel`` with its update ops run every step."""
    from towerpack.trainer import RunUpdateOps

    x, y = regression_data()
    return _train(
        trainer,
        _UpdateOpsModel(),
        QueueInput(RankSlices(x, y, BATCH)),
        epochs=2,
        steps_per_epoch=5,
        extra_callbacks=[RunUpdateOps()],
    )


@pytest.mark.parametrize("resync", [True, False])
def test_per_epoch_resync_of_replicas_can_be_turned_off(resync):
    """Only tower 0 updates its statistics, so tower 1's replica of them diverges during an epoch:
    the per-epoch re-sync copies tower 0's over it; with the re-sync off it stays behind."""

    got = _train_update_ops_model(SyncMultiGPUTrainerReplicated(2, broadcast_every_epoch=resync))
    assert got["count"] == 10
    assert got["tower1/count"] == (10 if resync else 0)
    assert bool(got["tower1/ema"] == got["ema"]) is resync
    # The trainable replicas never diverge: the all-reduce keeps them equal either way.
    np.testing.assert_array_equal(got["tower1/w"], got["w"])


def test_the_user_session_config_is_left_unchanged():
    x, y = regression_data()
    config = tfv1.ConfigProto(allow_soft_placement=True)
    _train(
        SyncMultiGPUTrainerReplicated(3),
        Regression64(),
        QueueInput(RankSlices(x, y, BATCH)),
        epochs=1,
        steps_per_epoch=1,
        session_config=config,
    )
    assert config == tfv1.ConfigProto(allow_soft_placement=True)


def test_checkpoints_of_replicated_and_simple_trainer_are_interchangeable(tmp_path):
    x, y = regression_data()
    rep_dir, simple_dir = tmp_path / "rep", tmp_path / "simple"
    got = _train(
        SyncMultiGPUTrainerReplicated(2),
        Adam64(),
        QueueInput(RankSlices(x, y, BATCH)),
        epochs=1,
        callbacks=[ModelSaver(checkpoint_dir=str(rep_dir))],
    )
    _train(
        SimpleTrainer(),
        Adam64(),
        QueueInput(RankSlices(x, y, BATCH)),
        epochs=1,
        callbacks=[ModelSaver(checkpoint_dir=str(simple_dir))],
    )
    rep_ckpt = tf.train.latest_checkpoint(str(rep_dir))
    names = {n for n, _ in tf.train.list_variables(rep_ckpt)}
    assert names == {n for n, _ in tf.train.list_variables(tf.train.latest_checkpoint(str(simple_dir)))}
    assert not any(n.startswith("tower") for n in names)

    # The replicated checkpoint restores into a 3-tower replicated trainer: every replica gets it.
    restored = _train(
        SyncMultiGPUTrainerReplicated(3),
        Adam64(),
        QueueInput(RankSlices(x, y, BATCH)),
        epochs=1,
        steps_per_epoch=0,
        session_init=rep_ckpt,
    )
    for k in ("", "tower1/", "tower2/"):
        np.testing.assert_array_equal(restored[f"{k}w"], got["w"])
        np.testing.assert_array_equal(restored[f"{k}w/Adam"], got["w/Adam"])


def test_inference_runner_and_predictors_use_the_trained_replicas(logdir):
    x, y = regression_data()
    vx, vy = regression_data(n=32, seed=5)
    trainer = SyncMultiGPUTrainerReplicated(2)
    predicted: dict = {}

    class Predict(FetchVariables):
        """A predictor on tower 1, which reads tower 1's replica of the variables."""

        def _setup_graph(self):
            self.predictor = self.trainer.get_predictor(["x", "y"], ["cost"], device=1)

        def _after_train(self):
            predicted["cost"] = self.predictor(vx, vy)[0]

    got = _train(
        trainer,
        Regression64(),
        QueueInput(RankSlices(x, y, BATCH)),
        epochs=2,
        callbacks=[InferenceRunner(RankSlices(vx, vy, 32), [ScalarStats("cost")]), Predict({})],
        monitors=[JSONWriter()],
    )
    expected = np.mean((vx @ got["w"] + got["b"] - vy) ** 2)
    stats = json.loads((logdir / "stats.json").read_text())
    assert stats[-1]["validation_cost"] == pytest.approx(expected, rel=1e-9)
    assert predicted["cost"] == pytest.approx(expected, rel=1e-9)
    assert [h.vs_name for h in trainer.towers.training()] == ["", "tower1"]


def test_older_config_form_and_build_on_multi_tower():
    from towerpack.trainer import MultiGPUTrainerBase

    x, y = regression_data()
    out: dict = {}
    with tf.Graph().as_default():
        config = TrainConfig(
            model=Regression64(),
            dataflow=RankSlices(x, y, BATCH),
            callbacks=[FetchVariables(out)],
            monitors=[],
            extra_callbacks=[],
            max_epoch=1,
            nr_tower=2,
        )
        trainer = SyncMultiGPUTrainerReplicated(config, gpu_prefetch=False)
        assert trainer.devices == ["/cpu:0", "/cpu:1"]
        trainer.train()
    assert np.isfinite(out["w"]).all()

    def tower():
        return tfv1.get_variable("v", [2], initializer=tfv1.zeros_initializer())

    with tf.Graph().as_default():
        devices = ["/cpu:0", "/cpu:1"]
        shared = MultiGPUTrainerBase.build_on_multi_tower([0, 1], tower, devices)
        assert shared[0] is shared[1]
    with tf.Graph().as_default():
        rep = MultiGPUTrainerBase.build_on_multi_tower([0, 1], tower, devices, var_strategy="replicated")
        assert [v.op.name for v in rep] == ["v", "tower1/v"]
        assert [v.op.name for v in tfv1.global_variables()] == ["v"]


def _config(**kwargs):
    x, y = regression_data()
    return TrainConfig(
        model=Regression64(), dataflow=RankSlices(x, y, BATCH), max_epoch=1, nr_tower=2, **kwargs
    )


def test_older_form_positionals_keep_their_reference_meaning():
    """The reference's ``(config, gpu_prefetch)``: a second positional False is not ``average``."""
    trainer = SyncMultiGPUTrainerReplicated(_config(), False)
    assert (trainer.gpu_prefetch, trainer.average, trainer.devices) == (False, True, ["/cpu:0", "/cpu:1"])
    assert SyncMultiGPUTrainerReplicated(_config(), average=False).average is False
    # The newer form: (gpus, average, mode).
    trainer = SyncMultiGPUTrainerReplicated(2, False, "collective")
    assert (trainer.average, trainer.mode, trainer.gpu_prefetch) == (False, AllReduceMode.COLLECTIVE, True)
    # The other trainers' older positionals already mean the same in both forms.
    ps = SyncMultiGPUTrainerParameterServer(_config(), "cpu", False)
    assert (ps.ps_device, ps.gpu_prefetch) == (PSDevice.CPU, False)
    assert AsyncMultiGPUTrainer(_config(), False).scale_gradient is False


def test_older_form_rejects_positionals_it_never_had():
    with pytest.raises(TypeError, match=r"at most 2 positional arguments.*gpu_prefetch"):
        SyncMultiGPUTrainerReplicated(_config(), False, "cpu")
    with pytest.raises(TypeError, match="multiple values for argument 'gpu_prefetch'"):
        SyncMultiGPUTrainerReplicated(_config(), False, gpu_prefetch=True)
    with pytest.raises(TypeError, match="multiple values for argument 'average'"):
        SyncMultiGPUTrainerReplicated(2, False, average=True)


def test_summaries_come_from_the_first_tower_only():
    class Summarized(Regression64):
        def build_graph(self, x, y):
            cost = super().build_graph(x, y)
            tfv1.summary.scalar("cost_summary", cost)
            return cost

    x, y = regression_data()
    with tf.Graph().as_default():
        trainer = SyncMultiGPUTrainerReplicated(3)
        trainer.setup_graph(
            Summarized().get_input_signature(),
            QueueInput(RankSlices(x, y, BATCH)),
            Summarized().build_graph,
            Summarized().get_optimizer,
        )
        summaries = tfv1.get_collection(tfv1.GraphKeys.SUMMARIES)
        assert [s.op.name for s in summaries] == ["tower0/cost_summary"]
        grads_devices = {
            op.device for op in tf.compat.v1.get_default_graph().get_operations() if "tower2/" in op.name
        }
        assert any(d.endswith("CPU:2") for d in grads_devices)


def test_bad_arguments_are_clear_errors():
    from towerpack.trainer import FeedInput

    with pytest.raises(ValueError, match="repeated"):
        SyncMultiGPUTrainerReplicated([0, 0])
    with pytest.raises(TypeError, match="gpus must be"):
        SyncMultiGPUTrainerReplicated("two")
    with pytest.raises(ValueError, match="all-reduce mode"):
        SyncMultiGPUTrainerReplicated(2, mode="bogus")
    with pytest.raises(ValueError, match="ps_device"):
        SyncMultiGPUTrainerParameterServer(2, ps_device="tpu")
    x, y = regression_data()
    with tf.Graph().as_default(), pytest.raises(TypeError, match="each tower reads its own batch"):
        launch_train_with_config(
            TrainConfig(model=Regression64(), data=FeedInput(RankSlices(x, y, BATCH)), max_epoch=1),
            SyncMultiGPUTrainerReplicated(2),
        )


def test_a_custom_trainer_from_the_builders_matches_simple_trainer():
    """The custom trainer of docs/multi_device.md."""
    from towerpack.trainer import RunOp, SingleCostTrainer
    from towerpack.trainer.graph_builder import SyncMultiGPUReplicatedBuilder

    class MyReplicatedTrainer(SingleCostTrainer):
        def __init__(self, devices):
            super().__init__()
            self.devices = devices

        def _setup_graph(self, input, get_cost_fn, get_opt_fn):
            builder = SyncMultiGPUReplicatedBuilder(range(len(self.devices)), devices=self.devices)
            grads = builder.call_for_each_tower(self._make_get_grad_fn(input, get_cost_fn, get_opt_fn))
            self.train_op, post_init = builder.build(grads, get_opt_fn)
            return [RunOp(post_init, run_before=True, run_as_trigger=False)]

    x, y = regression_data()
    expected = _reference(Regression64(), 2)
    got = _train(
        MyReplicatedTrainer(["/cpu:0", "/cpu:1"]),
        Regression64(),
        QueueInput(RankSlices(x, y, BATCH)),
        steps_per_epoch=len(RankSlices(x, y, BATCH * 2)),
        session_config=tfv1.ConfigProto(device_count={"CPU": 2}, allow_soft_placement=True),
    )
    np.testing.assert_allclose(got["w"], expected["w"], rtol=RTOL)
    np.testing.assert_array_equal(got["tower1/w"], got["w"])
