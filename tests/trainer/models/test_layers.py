"""The layers of towerpack.trainer.models: variable names, values against numpy, the reference's
argument forms, data formats, towers and bad input."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from towerpack.trainer import (
    AvgPooling,
    BatchNorm,
    BatchRenorm,
    BNReLU,
    ConcatWith,
    Conv2D,
    Conv2DTranspose,
    Deconv2D,
    Dropout,
    FixedUnPooling,
    FullyConnected,
    GlobalAvgPooling,
    InstanceNorm,
    LayerNorm,
    LeakyReLU,
    LinearWrap,
    Maxout,
    MaxPooling,
    PredictTowerContext,
    PReLU,
    TrainTowerContext,
    argscope,
    enable_argscope_for_function,
    get_arg_scope,
    l1_regularizer,
    l2_regularizer,
    layer_register,
    regularize_cost,
    regularize_cost_from_collection,
)
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.graph_builder.utils import override_to_local_variable

RNG = np.random.RandomState(0)


def _run(fetches, feed=None):
    with tfv1.Session() as sess:
        sess.run([tfv1.global_variables_initializer(), tfv1.local_variables_initializer()])
        return sess.run(fetches, feed)


def _names(collection=tfv1.GraphKeys.GLOBAL_VARIABLES):
    return sorted(v.op.name for v in tfv1.get_collection(collection))


def _image(shape=(2, 6, 6, 3)):
    return tf.constant(RNG.normal(size=shape).astype(np.float32))


# ---- variables and values ----------------------------------------------------------------------


def test_conv2d_variables_and_value_match_a_numpy_convolution(graph):
    x = _image()
    out = Conv2D("conv0", x, 4, 3, activation=tf.nn.relu)
    assert _names() == ["conv0/W", "conv0/b"]
    assert out.op.name == "conv0/output"
    W, b = out.variables.W, out.variables.b
    assert W.shape.as_list() == [3, 3, 3, 4] and b.shape.as_list() == [4]
    got, xv, wv = _run([out, x, W])
    padded = np.pad(xv, [(0, 0), (1, 1), (1, 1), (0, 0)])
    expected = np.zeros((2, 6, 6, 4), np.float32)
    for i in range(6):
        for j in range(6):
            expected[:, i, j] = np.einsum("nhwc,hwco->no", padded[:, i : i + 3, j : j + 3], wv)
    np.testing.assert_allclose(got, np.maximum(expected, 0), rtol=1e-4, atol=1e-5)


def test_default_kernel_initializer_is_he_normal(graph):
    out = Conv2D("conv", _image((1, 4, 4, 64)), 256, 3)
    w = _run(out.variables.W)
    # He normal over fan_in = 3*3*64: std = sqrt(2 / 576).
    assert np.std(w) == pytest.approx(np.sqrt(2 / 576), rel=0.05)


def test_fully_connected_flattens_and_names_W_b(graph):
    x = _image((3, 2, 2, 5))
    out = FullyConnected("fc", x, 7, use_bias=False)
    assert _names() == ["fc/W"]
    got, xv, wv = _run([out, x, out.variables.W])
    np.testing.assert_allclose(got, xv.reshape(3, -1) @ wv, rtol=1e-5)


@pytest.mark.data_format
def test_nchw_and_nhwc_give_the_same_result(graph):
    x = _image((2, 8, 8, 3))
    init = tfv1.constant_initializer(RNG.normal(size=(3, 3, 3, 4)).astype(np.float32))
    outs = []
    for fmt, data in (("NHWC", x), ("channels_first", tf.transpose(x, [0, 3, 1, 2]))):
        with tfv1.variable_scope(fmt), argscope([Conv2D, MaxPooling, BatchNorm], data_format=fmt):
            y = Conv2D("conv", data, 4, 3, kernel_initializer=init, strides=2)
            y = MaxPooling("pool", y, 2)
            y = GlobalAvgPooling("gap", y, data_format=fmt)
        outs.append(y)
    a, b = _run(outs)
    np.testing.assert_allclose(a, b, rtol=1e-5)


def test_grouped_convolution_equals_separate_convolutions(graph):
    x = _image((1, 5, 5, 4))
    out = Conv2D("g", x, 6, 3, split=2, use_bias=False)
    assert out.variables.W.shape.as_list() == [3, 3, 2, 6]
    got, xv, wv = _run([out, x, out.variables.W])
    with tf.Graph().as_default():
        halves = [
            tf.nn.conv2d(xv[..., 2 * g : 2 * g + 2], wv[..., 3 * g : 3 * g + 3], 1, "SAME") for g in range(2)
        ]
        expected = _run(tf.concat(halves, -1))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("padding", "size"), [("same", 8), ("valid", 9)])
def test_conv2d_transpose_output_size(graph, padding, size):
    x = tfv1.placeholder(tf.float32, [None, 4, 4, 3])
    out = Conv2DTranspose("deconv", x, 5, 3, 2, padding=padding)
    assert out.shape.as_list() == [None, size, size, 5]
    assert out.variables.W.shape.as_list() == [3, 3, 5, 3]
    assert _run(out, {x: np.ones((2, 4, 4, 3))}).shape == (2, size, size, 5)
    assert Deconv2D is Conv2DTranspose


def test_pooling_layers(graph):
    x = _image((1, 4, 4, 2))
    mx, av = MaxPooling("max", x, 2), AvgPooling("avg", x, 3, stride=1, padding="SAME")
    gap = GlobalAvgPooling("gap", x)
    got_max, got_avg, got_gap, xv = _run([mx, av, gap, x])
    np.testing.assert_allclose(got_max, xv.reshape(1, 2, 2, 2, 2, 2).max(axis=(2, 4)))
    assert got_avg.shape == (1, 4, 4, 2)
    np.testing.assert_allclose(got_gap, xv.mean(axis=(1, 2)), rtol=1e-6)
    assert gap.op.name == "gap/output"


@pytest.mark.data_format
@pytest.mark.parametrize("mat", [None, np.array([[1, 2], [3, 4]], np.float32), "3x3"])
def test_fixed_unpooling_is_a_kronecker_product(graph, mat):
    x = _image((2, 3, 3, 2))
    shape = 3 if isinstance(mat, str) else 2
    if isinstance(mat, str):
        mat = None
    out = FixedUnPooling("unpool", x, shape, unpool_mat=mat)
    got, xv = _run([out, x])
    m = mat if mat is not None else np.eye(1, shape * shape).reshape(shape, shape)
    expected = np.einsum("nijc,ab->niajbc", xv, m).reshape(2, 3 * shape, 3 * shape, 2)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    nchw = FixedUnPooling(
        "unpool_nchw", tf.transpose(x, [0, 3, 1, 2]), shape, unpool_mat=mat, data_format="NCHW"
    )
    np.testing.assert_allclose(_run(nchw), expected.transpose(0, 3, 1, 2), rtol=1e-6)


def test_layer_and_instance_norm_values(graph):
    x = _image((2, 3, 3, 4))
    ln, inorm = LayerNorm("ln", x), InstanceNorm("in", x, use_affine=True)
    assert _names() == ["in/beta", "in/gamma", "ln/beta", "ln/gamma"]
    got_ln, got_in, xv = _run([ln, inorm, x])
    ref_ln = (xv - xv.mean((1, 2, 3), keepdims=True)) / np.sqrt(xv.var((1, 2, 3), keepdims=True) + 1e-5)
    ref_in = (xv - xv.mean((1, 2), keepdims=True)) / np.sqrt(xv.var((1, 2), keepdims=True) + 1e-5)
    np.testing.assert_allclose(got_ln, ref_ln, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_in, ref_in, rtol=1e-4, atol=1e-5)


def test_activation_layers(graph):
    x = tf.constant([[-2.0, -1.0, 3.0, 4.0]])
    prelu = PReLU("prelu", x, init=0.25)
    got = _run([LeakyReLU(x, 0.1), prelu, Maxout(x, 2), ConcatWith(x, [x], 0)])
    np.testing.assert_allclose(got[0], [[-0.2, -0.1, 3, 4]], rtol=1e-6)
    np.testing.assert_allclose(got[1], [[-0.5, -0.25, 3, 4]], rtol=1e-6)
    np.testing.assert_allclose(got[2], [[-1, 4]])
    assert got[3].shape == (2, 4)
    assert _names() == ["prelu/alpha"]


# ---- argscope, old argument names, LinearWrap -----------------------------------------------------


def test_argscope_nests_and_explicit_arguments_win(graph):
    x = _image((1, 4, 4, 3))
    with argscope(Conv2D, filters=8, kernel_size=3), argscope([Conv2D, FullyConnected], use_bias=False):
        assert get_arg_scope()["Conv2D"] == {"filters": 8, "kernel_size": 3, "use_bias": False}
        a = Conv2D("a", x)
        b = Conv2D("b", x, 2, kernel_size=1, use_bias=True)
        with argscope(Conv2D, filters=5):
            c = Conv2D("c", x)
        d = Conv2D("d", x)
    assert get_arg_scope() == {}
    shapes = {n: v.shape.as_list() for n, v in ((v.op.name, v) for v in tfv1.global_variables())}
    assert shapes == {
        "a/W": [3, 3, 3, 8],
        "b/W": [1, 1, 3, 2],
        "b/b": [2],
        "c/W": [3, 3, 3, 5],
        "d/W": [3, 3, 3, 8],
    }
    del a, b, c, d


def test_argscope_pops_when_the_block_raises(graph):
    with pytest.raises(RuntimeError), argscope(Conv2D, filters=3):
        raise RuntimeError("inside")
    assert get_arg_scope() == {}


def test_old_argument_names_and_nl(graph):
    x = _image((1, 4, 4, 3))
    seen = []

    def nl(t, name=None):
        seen.append(name)
        return tf.nn.relu(t, name=name)

    with argscope(Conv2D, kernel_shape=3, nl=nl, out_channel=6):
        out = Conv2D("conv", x, stride=2, W_init=tfv1.ones_initializer(), b_init=tfv1.ones_initializer())
    fc = FullyConnected("fc", out, out_dim=2)
    assert out.shape.as_list() == [1, 2, 2, 6] and fc.shape.as_list() == [1, 2]
    assert seen == [None]
    w, b = _run([out.variables.W, out.variables.b])
    assert (w == 1).all() and (b == 1).all()
    with pytest.raises(TypeError, match="both 'out_channel' and its newer name 'filters'"):
        Conv2D("bad", x, kernel_size=3, filters=2, out_channel=2)
    with pytest.raises(TypeError, match="positional"):
        Conv2D("bad2", x, 2, 3, 1)


def test_linearwrap_chain_tf_proxy_and_apply(graph):
    x = _image((2, 8, 8, 1))
    with argscope(Conv2D, kernel_size=3, activation=tf.nn.relu, filters=4):
        lw = (
            LinearWrap(x)
            .Conv2D("conv0")
            .MaxPooling("pool0", 2)
            .tf.multiply(0.5)
            .apply(tf.nn.relu)
            .apply2(tf.add, tf.constant(1.0))
            .FullyConnected("fc0", 16, activation=tf.nn.relu)
            .Dropout("dropout", rate=0.5, training=False)
            .FullyConnected("fc1", 10)
        )
    out = lw()
    assert out is lw.tensor() and out.op.name == "fc1/output"
    assert _names() == ["conv0/W", "conv0/b", "fc0/W", "fc0/b", "fc1/W", "fc1/b"]
    with pytest.raises(AttributeError, match="no layer 'Conv3D'"):
        LinearWrap(x).Conv3D("c", 3)


def test_linearwrap_tf_is_the_v1_api_with_v2_names_as_fallback(graph):
    # A decoder in the reference's style upsamples with a TF 1 name that TF 2's namespace lacks.
    x = tf.constant(np.arange(4, dtype=np.float32).reshape(1, 2, 2, 1))
    up = LinearWrap(x).tf.image.resize_nearest_neighbor([4, 4], align_corners=True)()
    # tf.compat.v1.nn.dropout's second positional argument is keep_prob (TF 2's is rate): keep all.
    kept = LinearWrap(x).tf.nn.dropout(1.0)()
    gelu = LinearWrap(x).tf.nn.gelu()()  # only TF 2 has it
    got_up, got_kept, got_gelu = _run([up, kept, gelu])
    np.testing.assert_array_equal(got_up[0, :, :, 0], np.repeat(np.repeat([[0, 1], [2, 3]], 2, 0), 2, 1))
    np.testing.assert_array_equal(got_kept, _run(x))
    np.testing.assert_allclose(got_gelu, _run(tf.nn.gelu(x)), rtol=1e-6)
    with pytest.raises(AttributeError, match=r"no tf\.image\.resize_nearest_neighbour"):
        LinearWrap(x).tf.image.resize_nearest_neighbour([4, 4])


def test_custom_layers_register_and_take_argscope(graph):
    @layer_register(log_shape=True)
    def ScaledIdentityForTest(x, factor=1.0):
        v = tfv1.get_variable("v", [], initializer=tfv1.constant_initializer(factor))
        return x * v

    x = tf.constant([1.0, 2.0])
    with argscope(ScaledIdentityForTest, factor=3.0):
        out = LinearWrap(x).ScaledIdentityForTest("s")()
    np.testing.assert_allclose(_run(out), [3.0, 6.0])
    assert _names() == ["s/v"]


def test_enable_argscope_for_function(graph):
    def dense(x, units, name=None):
        return tf.zeros([units], name=name)

    dense = enable_argscope_for_function(dense)
    with argscope(dense, units=3):
        assert dense(tf.constant(1.0)).shape.as_list() == [3]


# ---- dropout, towers, regularization ------------------------------------------------------------


def test_dropout_forms_and_training_from_the_tower(graph, caplog):
    x = tf.ones([1000])
    with TrainTowerContext(""):
        train = [Dropout(x), Dropout(x, keep_prob=0.8), Dropout(x, rate=0.2), Dropout(x, training=False)]
        with caplog.at_level(logging.WARNING, logger="towerpack.trainer"):
            old = Dropout("d", x, 0.8)
        assert "keep_prob" in caplog.text
    with PredictTowerContext("pred"):
        infer = Dropout(x, rate=0.9)
    got = _run([*train, old, infer])
    kept = [np.mean(g != 0) for g in got]
    assert kept[0] == pytest.approx(0.5, abs=0.06)
    assert kept[1] == pytest.approx(0.8, abs=0.05) and kept[2] == pytest.approx(0.8, abs=0.05)
    assert kept[3] == 1.0 and kept[5] == 1.0
    assert kept[4] == pytest.approx(0.8, abs=0.05)
    with pytest.raises(TypeError, match="not both"):
        Dropout(x, keep_prob=0.5, rate=0.5, training=True)


def _tower_model(x):
    with argscope(Conv2D, kernel_size=3, activation=BNReLU):
        y = Conv2D("conv0", x, 4)
        y = FullyConnected("fc", y, 2, kernel_regularizer=l2_regularizer(0.1))
    return y


def test_inference_tower_reuses_every_variable(graph):
    x = _image((2, 4, 4, 3))
    with TrainTowerContext(""):
        train = _tower_model(x)
    names = _names()
    assert "conv0/bn/mean/EMA" in names and "conv0/bn/variance/EMA" in names
    with tfv1.variable_scope(tfv1.get_variable_scope(), reuse=True), PredictTowerContext("InferenceTower"):
        infer = _tower_model(x)
    assert _names() == names  # nothing new
    assert infer.op.name == "InferenceTower/fc/output"
    # Model variables (the EMAs) are registered once, by the main tower.
    assert _names(tfv1.GraphKeys.MODEL_VARIABLES) == ["conv0/bn/mean/EMA", "conv0/bn/variance/EMA"]
    del train


def test_replicated_tower_has_its_own_copies_and_regularizes_only_them(graph):
    x = _image((2, 4, 4, 3))
    costs = []
    for k in range(2):
        with (
            override_to_local_variable(enable=k > 0),
            TrainTowerContext(f"tower{k}", vs_name=f"tower{k}" if k else "", index=k, total=2),
        ):
            _tower_model(x)
            costs.append((regularize_cost("fc/W", l1_regularizer(1.0)), regularize_cost_from_collection()))
    assert "tower1/conv0/W" in _names(tfv1.GraphKeys.LOCAL_VARIABLES)
    # Only the main tower updates the EMAs (UPDATE_OPS), and only it adds MODEL_VARIABLES.
    updates = tfv1.get_collection(tfv1.GraphKeys.UPDATE_OPS)
    assert sorted(op.name for op in updates) == ["tower0/conv0/bn/mean_ema_op", "tower0/conv0/bn/var_ema_op"]
    (l1_0, coll_0), (l1_1, coll_1) = costs
    by_name = {v.op.name: v for v in tfv1.global_variables() + tfv1.local_variables()}
    got = _run([l1_0, coll_0, l1_1, coll_1, by_name["fc/W"], by_name["tower1/fc/W"]])
    np.testing.assert_allclose(got[0], np.abs(got[4]).sum(), rtol=1e-5)
    np.testing.assert_allclose(got[1], 0.1 * (got[4] ** 2).sum() / 2, rtol=1e-5)
    np.testing.assert_allclose(got[2], np.abs(got[5]).sum(), rtol=1e-5)
    np.testing.assert_allclose(got[3], 0.1 * (got[5] ** 2).sum() / 2, rtol=1e-5)


def test_regularize_cost_is_zero_outside_training(graph):
    with PredictTowerContext("pred"):
        tfv1.get_variable("fc/W", [2])
        cost = regularize_cost(".*", tf.nn.l2_loss)
    assert cost.op.name == "pred/empty_regularize_cost"
    assert _run(cost) == 0.0


# ---- bad input --------------------------------------------------------------------------------


def test_bad_input_gives_clear_errors(graph):
    x = _image((1, 4, 4, 3))
    with pytest.raises(TypeError, match="name first"):
        Conv2D(x, 3, 3)
    with pytest.raises(ValueError, match="Invalid inputs to layer Conv2D"):
        Conv2D("c", np.ones((1, 4, 4, 3)), 3, 3)
    with pytest.raises(ValueError, match="unknown data_format 'NWHC'"):
        Conv2D("c2", x, 3, 3, data_format="NWHC")
    with pytest.raises(ValueError, match="input channels to be known"):
        Conv2D("c3", tfv1.placeholder(tf.float32, [None, 4, 4, None]), 3, 3)
    with pytest.raises(ValueError, match="split=4 must divide"):
        Conv2D("c4", x, 4, 3, split=4)
    with pytest.raises(ValueError, match="padding must be"):
        MaxPooling("p", x, 2, padding="full")
    with pytest.raises(ValueError, match="a 2-D or 4-D"):
        LayerNorm("ln", tf.ones([2, 3, 4]))
    with pytest.raises(ValueError, match="registered already"):
        layer_register()(Conv2D.f)


def test_batch_renorm_trains_and_infers(graph):
    x = _image((8, 3))
    with TrainTowerContext(""):
        y = BatchRenorm("brn", x, 3.0, 5.0)
    assert _names() == sorted(
        f"brn/{n}"
        for n in ("beta", "gamma", "moving_mean", "moving_variance", "renorm_mean", "renorm_stddev")
    )
    with tfv1.variable_scope(tfv1.get_variable_scope(), reuse=True), PredictTowerContext("p"):
        z = BatchRenorm("brn", x, 3.0, 5.0)
    updates = tfv1.get_collection(tfv1.GraphKeys.UPDATE_OPS)
    assert len(updates) == 4
    got_y, got_z = _run([y, z])
    assert np.isfinite(got_y).all() and got_z.shape == (8, 3)
