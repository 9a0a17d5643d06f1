"""towerpack.utils.loadcaffe: the conversion rules on plain arrays (checked by computing layers both
ways), the output files, and the errors where pycaffe or protoc is missing."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import numpy as np
import pytest

from towerpack.utils import loadcaffe
from towerpack.utils.loadcaffe import CaffeLayer, convert_layers

rng = np.random.RandomState(0)


def test_convolution_weights_compute_the_same_layer_in_nhwc():
    w = rng.randn(4, 3, 2, 2).astype(np.float32)  # Caffe: out, in, h, w
    b = rng.randn(4).astype(np.float32)
    params = convert_layers([CaffeLayer("conv1", "Convolution", [w, b], ("data",))])
    assert sorted(params) == ["conv1/W", "conv1/b"] and params["conv1/W"].shape == (2, 2, 3, 4)
    x = rng.randn(3, 5, 5).astype(np.float32)  # C, H, W
    windows = np.lib.stride_tricks.sliding_window_view(x, (2, 2), axis=(1, 2))  # C, 4, 4, 2, 2
    caffe = np.einsum("ocij,cyxij->oyx", w, windows) + b[:, None, None]
    nhwc_windows = windows.transpose(1, 2, 3, 4, 0)  # 4, 4, kh, kw, C
    ours = np.einsum("yxijc,ijco->yxo", nhwc_windows, params["conv1/W"]) + params["conv1/b"]
    np.testing.assert_allclose(ours, caffe.transpose(1, 2, 0), rtol=1e-5, atol=1e-5)
    no_bias = convert_layers([CaffeLayer("c", "Convolution", [w])])
    assert sorted(no_bias) == ["c/W"]


def test_inner_product_after_a_spatial_layer_matches_an_nhwc_flatten():
    w = rng.randn(5, 2 * 3 * 4).astype(np.float32)  # out, C*H*W
    b = rng.randn(5).astype(np.float32)
    layer = CaffeLayer("fc6", "InnerProduct", [w, b], ("pool5",), input_shape=(1, 2, 3, 4))
    params = convert_layers([layer])
    assert params["fc6/W"].shape == (3, 4, 2, 5)
    x = rng.randn(2, 3, 4).astype(np.float32)  # C, H, W
    caffe = w @ x.reshape(-1) + b
    ours = x.transpose(1, 2, 0).reshape(-1) @ params["fc6/W"].reshape(-1, 5) + params["fc6/b"]
    np.testing.assert_allclose(ours, caffe, rtol=1e-5, atol=1e-5)
    flat = convert_layers([CaffeLayer("fc7", "InnerProduct", [w, b], ("fc6",), input_shape=(1, 24))])
    np.testing.assert_array_equal(flat["fc7/W"], w.T)


def test_batch_norm_statistics_are_divided_by_the_scale_factor_and_scale_merges_into_it():
    mean, var = np.array([2.0, 4.0]), np.array([6.0, 8.0])
    layers = [
        CaffeLayer("bn1", "BatchNorm", [mean, var, np.array([2.0])], ("conv1",)),
        CaffeLayer("scale1", "Scale", [np.array([1.5, 2.5]), np.array([0.1, 0.2])], ("conv1",)),
        CaffeLayer("relu1", "ReLU", [], ("conv1",)),
    ]
    params = convert_layers(layers)
    assert sorted(params) == ["bn1/beta", "bn1/gamma", "bn1/mean/EMA", "bn1/variance/EMA"]
    np.testing.assert_array_equal(params["bn1/mean/EMA"], [1.0, 2.0])
    np.testing.assert_array_equal(params["bn1/variance/EMA"], [3.0, 4.0])
    np.testing.assert_array_equal(params["bn1/gamma"], [1.5, 2.5])
    np.testing.assert_array_equal(params["bn1/beta"], [0.1, 0.2])
    untrained = convert_layers([CaffeLayer("bn", "BatchNorm", [mean, var, np.array([0.0])])])
    np.testing.assert_array_equal(untrained["bn/mean/EMA"], [0.0, 0.0])  # Caffe's rule, not a division by 0


def test_unsupported_and_malformed_layers(caplog):
    with caplog.at_level(logging.WARNING, logger="towerpack.utils.loadcaffe"):
        params = convert_layers([CaffeLayer("norm1", "LRN", []), CaffeLayer("p", "PReLU", [np.ones(3)])])
    assert params == {}
    assert [r.getMessage() for r in caplog.records] == [
        "Layer p of type PReLU has weights but is not supported: skipped"
    ]
    with pytest.raises(ValueError, match="Scale layer s does not follow a BatchNorm layer"):
        convert_layers([CaffeLayer("s", "Scale", [np.ones(2), np.ones(2)], ("x",))])
    with pytest.raises(ValueError, match="InnerProduct layer fc has 1 weight blobs, expected 2"):
        convert_layers([CaffeLayer("fc", "InnerProduct", [np.ones((2, 2))])])
    with pytest.raises(ValueError, match=r"Convolution layer c: weights of shape \(2, 2\), expected 4-D"):
        convert_layers([CaffeLayer("c", "Convolution", [np.ones((2, 2))])])


def test_outputs_are_npz_with_the_weight_names(tmp_path, caplog):
    params = {"conv1/W": np.ones((1, 1, 1, 2), np.float32), "bn1/mean/EMA": np.zeros(2)}
    loadcaffe._save(params, str(tmp_path / "w.npz"))
    with np.load(tmp_path / "w.npz") as saved:
        assert sorted(saved.files) == ["bn1/mean/EMA", "conv1/W"]
        np.testing.assert_array_equal(saved["conv1/W"], params["conv1/W"])
    loadcaffe._save(params, str(tmp_path / "w.npy"))
    assert "prefer .npz" in caplog.text
    assert sorted(np.load(tmp_path / "w.npy", allow_pickle=True).item()) == sorted(params)


def run_cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "towerpack.utils.loadcaffe", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )


def test_the_command_line_says_what_is_wrong(tmp_path):
    proto, model = tmp_path / "deploy.prototxt", tmp_path / "model.caffemodel"
    proto.write_text("name: 'x'")
    model.write_bytes(b"\x00")
    done = run_cli(str(proto), str(model), str(tmp_path / "out.h5"))
    assert done.returncode == 2 and "the output must end in .npz or .npy, got" in done.stderr
    done = run_cli(str(proto), str(tmp_path / "missing.caffemodel"), str(tmp_path / "out.npz"))
    assert done.returncode == 1 and "missing.caffemodel does not exist" in done.stderr
    done = run_cli(str(proto), str(model), str(tmp_path / "out.npz"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "loading a Caffe model needs pycaffe (`import caffe` failed" in done.stderr
    assert not (tmp_path / "out.npz").exists()


def test_get_caffe_pb_needs_protoc(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORPACK_DATASET", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(FileNotFoundError, match=r"compiles caffe\.proto with protoc, which is not on PATH"):
        loadcaffe.get_caffe_pb()
    assert not (tmp_path / "caffe" / "caffe.proto").exists()  # nothing was downloaded first
