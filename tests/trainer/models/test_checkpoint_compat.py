"""A checkpoint written by tensorpack for a model built from its layers loads into the same model
built here, with identical outputs.

The checkpoint is made the way tensorpack 0.11 stores one: TF1 reference variables named exactly
as its layers name them (``conv0/W``, ``conv0/bn/mean/EMA``, ``fc/b`` ...), plus the global step
and optimizer slots a training run leaves, saved with a plain ``tf.train.Saver``. The expected
outputs are computed in numpy from the stored values, independently of the layers under test.
"""

from __future__ import annotations

import numpy as np
import pytest

from towerpack.dataflow import DataFromList
from towerpack.trainer import (
    BatchNorm,
    BNReLU,
    Conv2D,
    FullyConnected,
    MaxPooling,
    ModelDesc,
    ModelSaver,
    OfflinePredictor,
    PredictConfig,
    QueueInput,
    SimpleTrainer,
    SmartInit,
    TrainConfig,
    argscope,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf, tfv1

RNG = np.random.RandomState(3)
EPS = 1e-5


def _tensorpack_values() -> dict[str, np.ndarray]:
    """The model's variables as tensorpack names them, with made-up trained values."""

    def bn(prefix, c):
        return {
            f"{prefix}/beta": RNG.normal(size=c),
            f"{prefix}/gamma": 1 + 0.1 * RNG.normal(size=c),
            f"{prefix}/mean/EMA": RNG.normal(size=c),
            f"{prefix}/variance/EMA": 0.5 + RNG.rand(c),
        }

    values = {
        "conv0/W": RNG.normal(size=(3, 3, 2, 4)) * 0.3,
        "conv0/b": RNG.normal(size=4) * 0.1,
        **bn("conv0/bn", 4),
        "conv1/W": RNG.normal(size=(3, 3, 4, 4)) * 0.3,
        **bn("bn1", 4),
        "fc/W": RNG.normal(size=(16, 3)) * 0.3,
        "fc/b": RNG.normal(size=3),
    }
    return {k: v.astype(np.float32) for k, v in values.items()}


def _model(image, data_format="channels_last"):
    """The model, written as a tensorpack user writes it."""
    if data_format == "channels_first":
        image = tf.transpose(image, [0, 3, 1, 2])
    with argscope([Conv2D, MaxPooling, BatchNorm], data_format=data_format), argscope(Conv2D, kernel_size=3):
        net = Conv2D("conv0", image, 4, activation=BNReLU)
        net = Conv2D("conv1", net, 4, use_bias=False)
        net = tf.nn.relu(BatchNorm("bn1", net))
        net = MaxPooling("pool", net, 2)
        if data_format == "channels_first":
            net = tf.transpose(net, [0, 2, 3, 1])
        return tf.identity(FullyConnected("fc", net, 3), name="logits")


def _numpy_forward(x, v):
    def conv(x, w):
        _, h, wd, _ = x.shape
        p = np.pad(x, [(0, 0), (1, 1), (1, 1), (0, 0)])
        return np.stack(
            [
                np.stack([np.einsum("nhwc,hwco->no", p[:, i : i + 3, j : j + 3], w) for j in range(wd)], 1)
                for i in range(h)
            ],
            1,
        )

    def bn(x, prefix):
        scale = v[f"{prefix}/gamma"] / np.sqrt(v[f"{prefix}/variance/EMA"] + EPS)
        return (x - v[f"{prefix}/mean/EMA"]) * scale + v[f"{prefix}/beta"]

    net = np.maximum(bn(conv(x, v["conv0/W"]) + v["conv0/b"], "conv0/bn"), 0)
    net = np.maximum(bn(conv(net, v["conv1/W"]), "bn1"), 0)
    net = net.reshape(len(x), 2, 2, 2, 2, 4).max(axis=(2, 4))
    return net.reshape(len(x), -1) @ v["fc/W"] + v["fc/b"]


@pytest.fixture(scope="module")
def tensorpack_checkpoint(tmp_path_factory):
    """A checkpoint with tensorpack's names, TF1 reference variables, and a training run's extras."""
    path = str(tmp_path_factory.mktemp("tp") / "model-1000")
    values = _tensorpack_values()
    with tf.Graph().as_default():
        variables = [tfv1.Variable(val, name=name, use_resource=False) for name, val in values.items()]
        variables.append(tfv1.Variable(np.int64(1000), name="global_step", use_resource=False))
        variables.append(
            tfv1.Variable(np.zeros((3, 3, 2, 4), np.float32), name="conv0/W/Momentum", use_resource=False)
        )
        with tfv1.Session() as sess:
            sess.run(tfv1.global_variables_initializer())
            tfv1.train.Saver(variables).save(sess, path, write_meta_graph=False)
    return path, values


def _predict(session_init, data_format="channels_last"):
    config = PredictConfig(
        tower_func=lambda image: _model(image, data_format),
        input_signature=[tf.TensorSpec([None, 4, 4, 2], tf.float32, "image")],
        output_names=["logits"],
        session_init=session_init,
    )
    predictor = OfflinePredictor(config)
    try:
        return predictor(X)[0]
    finally:
        predictor.close()


X = RNG.normal(size=(5, 4, 4, 2)).astype(np.float32)


@pytest.mark.data_format
@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_tensorpack_checkpoint_loads_with_identical_outputs(tensorpack_checkpoint, data_format):
    path, values = tensorpack_checkpoint
    got = _predict(SmartInit(path), data_format)
    np.testing.assert_allclose(got, _numpy_forward(X, values), rtol=1e-4, atol=1e-5)


def test_tensorpack_npz_dump_loads_with_identical_outputs(tensorpack_checkpoint, tmp_path):
    """``dump_session_params`` writes ``name:0`` keys into an .npz."""
    _, values = tensorpack_checkpoint
    npz = tmp_path / "params.npz"
    np.savez(npz, **{f"{k}:0": v for k, v in values.items()})
    got = _predict(SmartInit(str(npz)))
    np.testing.assert_allclose(got, _numpy_forward(X, values), rtol=1e-4, atol=1e-5)


def test_a_checkpoint_written_here_has_tensorpack_names(tmp_path, tensorpack_checkpoint):
    """Training this model saves exactly the variables tensorpack saves for it."""

    class Net(ModelDesc):
        def inputs(self):
            return [
                tf.TensorSpec([None, 4, 4, 2], tf.float32, "image"),
                tf.TensorSpec([None], tf.int32, "label"),
            ]

        def build_graph(self, image, label):
            logits = _model(image)
            return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=logits))

        def optimizer(self):
            return tfv1.train.MomentumOptimizer(0.1, 0.9)

    data = DataFromList([[X, np.arange(5) % 3]] * 2, shuffle=False)
    with tf.Graph().as_default():
        config = TrainConfig(
            model=Net(),
            data=QueueInput(data),
            callbacks=[ModelSaver(checkpoint_dir=str(tmp_path))],
            monitors=[],
            max_epoch=1,
        )
        launch_train_with_config(config, SimpleTrainer())
    saved = dict(tfv1.train.list_variables(tfv1.train.latest_checkpoint(str(tmp_path))))
    _, values = tensorpack_checkpoint
    expected = set(values) | {"global_step"} | {f"{k}/Momentum" for k in values if not k.endswith("/EMA")}
    assert set(saved) == expected
    for name, value in values.items():
        assert list(saved[name]) == list(value.shape), name
