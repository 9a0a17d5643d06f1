"""graph_builder utilities on hand-made graphs over logical CPU devices."""

import numpy as np
import pytest
import tensorflow as tf

from towerpack.trainer.compat import tfv1
from towerpack.trainer.graph_builder import (
    LeastLoadedDeviceSetter,
    aggregate_grads,
    allreduce_grads,
    merge_grad_list,
    override_to_local_variable,
    split_grad_list,
)


def session(graph, num_cpus):
    return tfv1.Session(graph=graph, config=tfv1.ConfigProto(device_count={"CPU": num_cpus}))


def tower_grads(values):
    """values[k][i] -> constant tensors, tower k's on /cpu:k."""
    out = []
    for k, tower in enumerate(values):
        with tf.device(f"/cpu:{k}"):
            out.append([tf.constant(v, dtype=tf.float64) for v in tower])
    return out


@pytest.mark.parametrize("mode", ["collective", "cpu"])
@pytest.mark.parametrize("num_towers", [2, 3])
@pytest.mark.parametrize("average", [True, False])
def test_allreduce_gives_every_tower_the_exact_sum_or_mean(mode, num_towers, average):
    rng = np.random.RandomState(num_towers)
    values = [[rng.randn(4, 3), rng.randn(7)] for _ in range(num_towers)]
    graph = tf.Graph()
    with graph.as_default():
        reduced = allreduce_grads(tower_grads(values), average=average, mode=mode)
    with session(graph, num_towers) as sess:
        out = sess.run(reduced)
    for i in range(2):
        expected = sum(values[k][i] for k in range(num_towers))
        if average:
            expected = expected / num_towers
        for k in range(num_towers):
            np.testing.assert_allclose(out[k][i], expected, rtol=1e-15)
    for k in range(num_towers):
        assert all(t.device.endswith(f"CPU:{k}") for t in reduced[k])


def test_allreduce_of_one_tower_is_identity_and_rejects_bad_input():
    graph = tf.Graph()
    with graph.as_default():
        grads = tower_grads([[np.ones(2)]])
        assert allreduce_grads(grads) == grads
        with pytest.raises(ValueError, match="unknown all-reduce mode"):
            allreduce_grads(grads, mode="ring")
        with pytest.raises(ValueError, match="same number of gradients"):
            allreduce_grads([[tf.constant(1.0)], []], mode="cpu")
        two = tower_grads([[np.ones(2)], [np.ones(2)]])
        with pytest.raises(ValueError, match="needs every gradient on a GPU"):
            allreduce_grads(two, mode="nccl")


@pytest.mark.parametrize("average", [True, False])
def test_aggregate_grads_sums_shared_variables_next_to_them(average):
    values = [[np.arange(3.0), np.full((2, 2), 2.0)], [np.arange(3.0) * 10, np.full((2, 2), 4.0)]]
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/cpu:1"):
            v0 = tfv1.get_variable("v0", shape=[3], dtype=tf.float64)
        v1 = tfv1.get_variable("v1", shape=[2, 2], dtype=tf.float64)
        grads = tower_grads(values)
        pairs = merge_grad_list(grads, [[v0, v1], [v0, v1]])
        assert split_grad_list(pairs) == (grads, [[v0, v1], [v0, v1]])
        agg = aggregate_grads(pairs, colocation=True, average=average)
    assert [v for _, v in agg] == [v0, v1]
    assert agg[0][0].op.colocation_groups() == v0.op.colocation_groups()
    with session(graph, 2) as sess:
        got = sess.run([g for g, _ in agg])
    scale = 0.5 if average else 1.0
    np.testing.assert_array_equal(got[0], scale * np.arange(3.0) * 11)
    np.testing.assert_array_equal(got[1], scale * np.full((2, 2), 6.0))


def test_aggregate_grads_round_robin_devices_and_unshared_variables():
    graph = tf.Graph()
    with graph.as_default():
        a = tfv1.get_variable("a", shape=[1])
        b = tfv1.get_variable("b", shape=[1])
        g = tf.constant([1.0])
        agg = aggregate_grads(
            [[(g, a), (g, b)], [(g, a), (g, b)]], colocation=False, devices=["/cpu:0", "/cpu:1"]
        )
        assert [x.device for x, _ in agg] == ["/device:CPU:0", "/device:CPU:1"]
        with pytest.raises(ValueError, match="do not share variable #0"):
            aggregate_grads([[(g, a)], [(g, b)]])


def test_least_loaded_device_setter_balances_variables_by_size():
    sizes = [100, 10, 10, 50, 5, 40]
    graph = tf.Graph()
    setter = LeastLoadedDeviceSetter("/cpu:0", ["/cpu:1", "/cpu:2"])
    with graph.as_default(), tfv1.device(setter):
        variables = [tfv1.get_variable(f"v{i}", shape=[n]) for i, n in enumerate(sizes)]
        compute = tf.add_n([tf.reduce_sum(v) for v in variables])
        with tf.device("/cpu:0"):
            pinned = tfv1.get_variable("pinned", shape=[1000])
    # Greedy on creation order: 100 -> cpu1; 10, 10, 50 -> cpu2 (70); 5 -> cpu2 (75); 40 -> cpu2 (115).
    placed = [v.op.device for v in variables]
    assert placed == ["/device:CPU:1"] + ["/device:CPU:2"] * 5
    assert setter.ps_sizes == [100, 115]
    assert compute.device == "/device:CPU:0"
    assert pinned.op.device == "/device:CPU:0"
    with pytest.raises(ValueError, match="at least one parameter device"):
        LeastLoadedDeviceSetter("/cpu:0", [])


def test_override_to_local_variable_keeps_replicas_out_of_global_variables():
    graph = tf.Graph()
    with graph.as_default():
        g = tfv1.get_variable("global_one", shape=[2])
        with tfv1.variable_scope("tower1"), override_to_local_variable():
            local = tfv1.get_variable("w", shape=[2])
        with override_to_local_variable(enable=False):
            g2 = tfv1.get_variable("global_two", shape=[2])
        assert local.name == "tower1/w:0"
        assert tfv1.global_variables() == [g, g2]
        assert tfv1.local_variables() == [local]
