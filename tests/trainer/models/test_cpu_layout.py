"""channels_first on a CPU device: every layer that takes a data format gives, forward and
backward, what its channels_last twin gives on the same variables (oneDNN on or off: `make test`
runs this file both ways); on a GPU device the graph keeps its NCHW ops untouched."""

from __future__ import annotations

import numpy as np
import pytest

from towerpack.trainer import (
    AvgPooling,
    BatchNorm,
    BatchRenorm,
    BNReLU,
    Conv2D,
    Conv2DTranspose,
    FixedUnPooling,
    GlobalAvgPooling,
    InstanceNorm,
    LayerNorm,
    MaxPooling,
    TrainTowerContext,
    argscope,
    cpu_kernels,
)
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.models import cpu_layout

pytestmark = [pytest.mark.data_format, pytest.mark.usefixtures("graph")]

TO_NCHW, TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]


def _conv_init(shape):
    return tfv1.constant_initializer(np.random.RandomState(1).normal(size=shape).astype(np.float32))


def _with_scope(layers, data_format, build):
    with argscope(layers, data_format=data_format):
        return build()


# Each case: a layer call f(x, data_format) on a 4-D input of shape (2, 6, 6, 4) in NHWC terms.
CASES = {
    "conv": lambda x, f: Conv2D("l", x, 5, 3, data_format=f, kernel_initializer=_conv_init((3, 3, 4, 5))),
    "conv_strided_valid": lambda x, f: Conv2D("l", x, 3, 3, strides=2, padding="valid", data_format=f),
    "conv_dilated": lambda x, f: Conv2D("l", x, 3, 3, dilation_rate=2, data_format=f, activation=tf.nn.relu),
    "conv_grouped": lambda x, f: Conv2D("l", x, 4, 3, split=2, data_format=f, use_bias=False),
    "deconv_same": lambda x, f: Conv2DTranspose("l", x, 3, 3, 2, data_format=f),
    "deconv_valid": lambda x, f: Conv2DTranspose("l", x, 3, 4, 2, padding="valid", data_format=f),
    "maxpool": lambda x, f: MaxPooling("l", x, 2, data_format=f),
    "maxpool_same_overlapping": lambda x, f: MaxPooling("l", x, 3, 2, padding="same", data_format=f),
    "avgpool": lambda x, f: AvgPooling("l", x, 3, 1, padding="valid", data_format=f),
    "avgpool_same": lambda x, f: AvgPooling("l", x, 2, padding="same", data_format=f),
    "global_avgpool": lambda x, f: GlobalAvgPooling("l", x, data_format=f),
    "unpool": lambda x, f: FixedUnPooling("l", x, 2, data_format=f),
    "unpool_matrix": lambda x, f: FixedUnPooling(
        "l", x, 2, unpool_mat=np.full((2, 2), 0.5, "float32"), data_format=f
    ),
    "batchnorm_fused": lambda x, f: BatchNorm("l", x, data_format=f),
    "batchnorm_inference": lambda x, f: BatchNorm("l", x, data_format=f, training=False),
    "batchnorm_float64": lambda x, f: tf.cast(
        BatchNorm("l", tf.cast(x, tf.float64), data_format=f), tf.float32
    ),
    "batchnorm_ghost": lambda x, f: BatchNorm("l", x, data_format=f, virtual_batch_size=1),
    "batchrenorm": lambda x, f: BatchRenorm("l", x, 3.0, 5.0, data_format=f),
    "bnrelu": lambda x, f: _with_scope([BatchNorm], f, lambda: BNReLU("l", x)),
    "layernorm": lambda x, f: LayerNorm("l", x, data_format=f),
    "instancenorm": lambda x, f: InstanceNorm("l", x, data_format=f),
}


def _build(case: str, x_nhwc, data_format: str):
    x = x_nhwc if data_format == "channels_last" else tf.transpose(x_nhwc, TO_NCHW)
    y = CASES[case](x, data_format)
    if data_format == "channels_first" and y.shape.rank == 4:
        y = tf.transpose(y, TO_NHWC)
    return y


@pytest.mark.parametrize("case", sorted(CASES))
def test_channels_first_on_cpu_equals_channels_last(case):
    x = tf.constant(np.random.RandomState(0).normal(size=(2, 6, 6, 4)).astype(np.float32))
    outputs, grads = [], []
    with tf.device("/cpu:0"), TrainTowerContext(""):
        for i, data_format in enumerate(("channels_last", "channels_first")):
            with tfv1.variable_scope("twin", reuse=i > 0):  # both formats share the variables
                y = _build(case, x, data_format)
            # A loss that weighs every output element differently, so the gradients check the layout.
            weights = tf.reshape(tf.cos(tf.cast(tf.range(tf.size(y)), tf.float32)), tf.shape(y))
            loss = tf.reduce_sum(y * weights)
            variables = tfv1.trainable_variables()
            outputs.append(y)
            grads.append(tf.gradients(loss, [x, *variables]))
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        (y_last, y_first), (g_last, g_first) = sess.run([outputs, grads])
    assert y_last.shape == y_first.shape
    np.testing.assert_allclose(y_first, y_last, rtol=1e-4, atol=1e-5)
    assert len(g_first) == len(g_last)
    for a, b in zip(g_first, g_last, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def _ops_of(graph, types):
    return {op.type: op for op in graph.get_operations() if op.type in types}


LAYOUT_OPS = ("Conv2D", "Conv2DBackpropInput", "MaxPool", "AvgPool")


def _layout_model(x):
    with TrainTowerContext(""):
        y = Conv2D("conv", x, 4, 3, data_format="channels_first")
        y = Conv2DTranspose("deconv", y, 4, 3, 2, data_format="channels_first")
        y = MaxPooling("max", y, 2, data_format="channels_first")
        return AvgPooling("avg", y, 2, data_format="channels_first")


@pytest.mark.parametrize("device", ["/gpu:0", None])
def test_gpu_graphs_keep_their_nchw_ops(graph, monkeypatch, device):
    # As on a machine with a GPU: a GPU scope (or none, where TensorFlow places on the GPU).
    monkeypatch.setattr(cpu_kernels, "get_num_gpu", lambda: 1)
    x = tfv1.placeholder(tf.float32, [None, 3, 8, 8])
    with tf.device(device):
        _layout_model(x)
    ops = _ops_of(graph, LAYOUT_OPS)
    assert sorted(ops) == sorted(LAYOUT_OPS)
    assert {op.get_attr("data_format") for op in ops.values()} == {b"NCHW"}
    assert not [op for op in graph.get_operations() if op.type == "Transpose"]


@pytest.mark.parametrize(
    ("gpus", "device"),
    [(1, "/cpu:0"), (1, "/job:worker/replica:0/task:0/device:CPU:1"), (0, "/gpu:0"), (0, None)],
    ids=["cpu-scope-with-gpu", "remote-cpu", "gpu-scope-soft-placed", "no-gpu"],
)
def test_cpu_placements_run_nhwc_ops(graph, monkeypatch, gpus, device):
    monkeypatch.setattr(cpu_kernels, "get_num_gpu", lambda: gpus)
    x = tfv1.placeholder(tf.float32, [None, 3, 8, 8])
    with tf.device(device):
        y = _layout_model(x)
    ops = _ops_of(graph, LAYOUT_OPS)
    assert {op.get_attr("data_format") for op in ops.values()} == {b"NHWC"}
    assert y.shape.as_list() == [None, 4, 4, 4]


def test_device_functions_decide_by_op_type(graph, monkeypatch):
    # A device function (as replica_device_setter and the trainers' device setters are) is asked
    # with the op's type: pooling on the GPU, convolutions on the CPU.
    monkeypatch.setattr(cpu_kernels, "get_num_gpu", lambda: 1)
    x = tfv1.placeholder(tf.float32, [None, 3, 8, 8])
    with tfv1.device(lambda op: "/gpu:0" if op.type in ("MaxPool", "AvgPool") else "/cpu:0"):
        _layout_model(x)
    formats = {t: op.get_attr("data_format") for t, op in _ops_of(graph, LAYOUT_OPS).items()}
    assert formats == {
        "Conv2D": b"NHWC",
        "Conv2DBackpropInput": b"NHWC",
        "MaxPool": b"NCHW",
        "AvgPool": b"NCHW",
    }


def test_planned_device_type_reads_nested_scopes(graph):
    assert cpu_layout.planned_device_type("Conv2D") is None
    with tf.device("/gpu:1"):
        assert cpu_layout.planned_device_type("Conv2D") == "GPU"
        with tf.device("/cpu:0"):
            assert cpu_layout.planned_device_type("MaxPool") == "CPU"
        with tf.device(None):
            assert cpu_layout.planned_device_type("MaxPool") is None


@pytest.mark.parametrize(("dilation", "split"), [(2, 1), (1, 2), (3, 2)])
def test_dilated_and_grouped_convolutions_on_cpu_equal_tensorflows_kernel(graph, dilation, split):
    # On a CPU they are built from plain convolutions (TensorFlow's CPU kernels lack their filter
    # gradients); the forward kernel exists, and gives the reference values.
    x = tf.constant(np.random.RandomState(2).normal(size=(2, 9, 9, 4)).astype(np.float32))
    with tf.device("/cpu:0"):
        y = Conv2D("c", x, 6, 3, dilation_rate=dilation, split=split, use_bias=False)
        expected = tf.nn.conv2d(x, y.variables.W, 1, "SAME", dilations=dilation)
        (grad,) = tf.gradients(tf.reduce_sum(y * y), [y.variables.W])
    assert "Conv2DBackpropFilter" in {op.type for op in graph.get_operations()}
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        got, want, g = sess.run([y, expected, grad])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.isfinite(g).all() and np.abs(g).sum() > 0
