"""The reference's smaller tfutils names: session creators, Summary protobufs built in Python, the
collection-key names, the default session's devices, compat, tf.layers variables under the
reference's names, and `python -m towerpack.trainer.collect_env`."""

from __future__ import annotations

import io
import runpy

import numpy as np
import pytest
from PIL import Image

from towerpack.trainer import FullyConnected, NewSessionCreator, ReuseSessionCreator, SessionCreatorAdapter
from towerpack.trainer.collection import get_inverse_graphkeys
from towerpack.trainer.common import gpu_available_in_session
from towerpack.trainer.compat import is_tfv2, tf, tfv1
from towerpack.trainer.models.tflayer import rename_tflayer_get_variable
from towerpack.trainer.summary import create_image_summary, create_scalar_summary

pytestmark = pytest.mark.usefixtures("graph")


def test_reuse_session_creator_hands_over_the_session_to_a_monitored_session():
    v = tfv1.get_variable("v", initializer=5.0)
    sess = tfv1.Session()
    sess.run(v.initializer)
    creator = ReuseSessionCreator(sess)
    assert creator.create_session() is sess
    with tfv1.train.MonitoredSession(session_creator=creator) as monitored:
        assert monitored.run(v.assign_add(1.0)) == 6.0
    with pytest.raises(TypeError, match="ReuseSessionCreator takes a session, got str"):
        ReuseSessionCreator("sess")


def test_session_creator_adapter_passes_the_initialized_session_through_a_function():
    v = tfv1.get_variable("v", initializer=3.0)
    seen = []

    def wrap(sess):
        seen.append(sess.run(v))  # already initialized by NewSessionCreator
        return sess

    sess = SessionCreatorAdapter(NewSessionCreator(), wrap).create_session()
    assert seen == [3.0] and sess.run(v) == 3.0
    sess.close()
    with pytest.raises(TypeError, match=r"takes a tf\.compat\.v1\.train\.SessionCreator"):
        SessionCreatorAdapter(sess, wrap)
    with pytest.raises(TypeError, match="func must be callable"):
        SessionCreatorAdapter(NewSessionCreator(), None)


def test_scalar_summary():
    summary = create_scalar_summary("val/accuracy", np.float64(0.75))
    ((value,),) = [summary.value]
    assert (value.tag, value.simple_value) == ("val/accuracy", 0.75)
    with pytest.raises(TypeError, match="name must be a str"):
        create_scalar_summary(3, 1.0)


def _decode(value) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(value.image.encoded_image_string)))


def test_image_summary_holds_png_images_with_their_colours_and_tags():
    rgb = np.zeros((2, 4, 5, 3), np.uint8)
    rgb[0, :, :, 0] = 255  # red
    rgb[1, 1, 2] = (10, 20, 30)
    summary = create_image_summary("samples", rgb)
    assert [v.tag for v in summary.value] == ["samples/0", "samples/1"]
    for value, image in zip(summary.value, rgb, strict=True):
        assert (value.image.height, value.image.width, value.image.colorspace) == (4, 5, 3)
        np.testing.assert_array_equal(_decode(value), image)
    # One image: tagged with the name alone. Floats are clipped to 0..255.
    grey = np.array([[[[-5.0], [100.4]], [[255.0], [300.0]]]])
    ((value,),) = [create_image_summary("mask", grey).value]
    assert value.tag == "mask" and value.image.colorspace == 1
    np.testing.assert_array_equal(_decode(value), [[0, 100], [255, 255]])
    rgba = np.full((1, 2, 2, 4), 7, np.uint8)
    np.testing.assert_array_equal(_decode(create_image_summary("a", rgba).value[0]), rgba[0])


@pytest.mark.parametrize("shape", [(4, 5, 3), (1, 4, 5, 5)])
def test_image_summary_rejects_what_is_not_nhwc(shape):
    with pytest.raises(ValueError, match=r"expected NHWC images with 1-4 channels, got \("):
        create_image_summary("x", np.zeros(shape, np.uint8))


def test_inverse_graphkeys_names_each_standard_collection():
    names = get_inverse_graphkeys()
    assert names[tfv1.GraphKeys.TRAINABLE_VARIABLES] == "tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES"
    assert names["variables"] == "tf.compat.v1.GraphKeys.GLOBAL_VARIABLES"  # not its alias VARIABLES
    assert names[tfv1.GraphKeys.UPDATE_OPS] == "tf.compat.v1.GraphKeys.UPDATE_OPS"
    assert get_inverse_graphkeys() is names
    with pytest.raises(TypeError):
        names["x"] = "y"  # shared by every caller: read-only


def test_gpu_available_in_session_reads_the_default_sessions_devices():
    with pytest.raises(RuntimeError, match=r"gpu_available_in_session\(\) needs a default session"):
        gpu_available_in_session()
    with tfv1.Session() as sess, sess.as_default():
        assert gpu_available_in_session() is bool(tf.config.list_physical_devices("GPU"))
    with tfv1.Session(config=tfv1.ConfigProto(device_count={"GPU": 0})) as sess, sess.as_default():
        assert gpu_available_in_session() is False


def test_compat_is_tf2_in_graph_mode_and_leaves_tf_layers_alone():
    assert is_tfv2() is True
    assert not tf.executing_eagerly()
    assert not hasattr(tf, "layers")  # the reference set tf.layers = tf.keras.layers (Keras 3 here)


@pytest.mark.filterwarnings("ignore:`tf.layers.*` is deprecated:UserWarning")
def test_tf_layers_under_the_reference_names_load_a_towerpack_checkpoint(tmp_path):
    # What tfv1.layers gives with TF_USE_LEGACY_KERAS=1: tf-keras' graph-mode layer functions.
    from tf_keras.api._v1.keras.__internal__.legacy import layers

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with tf.Graph().as_default():
        y = FullyConnected("fc", tf.constant(x), 4, bias_initializer=tfv1.ones_initializer())
        with tfv1.Session() as sess:
            sess.run(tfv1.global_variables_initializer())
            expected = sess.run(y)
            tfv1.train.Saver().save(sess, str(tmp_path / "model"))
    with rename_tflayer_get_variable():
        out = layers.dense(tf.constant(x), 4, name="fc")
        layers.batch_normalization(out, name="bn", training=True)
        top = tfv1.get_variable("kernel", [1])
    names = sorted(v.op.name for v in tfv1.global_variables())
    assert names == ["W", "bn/beta", "bn/gamma", "bn/mean/EMA", "bn/variance/EMA", "fc/W", "fc/b"]
    assert top.op.name == "W"
    with tfv1.Session() as sess:
        tfv1.train.Saver([v for v in tfv1.global_variables() if v.op.name.startswith("fc/")]).restore(
            sess, str(tmp_path / "model")
        )
        np.testing.assert_allclose(sess.run(out), expected, rtol=1e-6)


def test_collect_env_module_prints_the_table_and_the_gpus_tensorflow_sees(monkeypatch, capsys, recwarn):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    # What `python -m towerpack.trainer.collect_env` runs, once the trainer is imported.
    runpy.run_module("towerpack.trainer.collect_env", run_name="__main__", alter_sys=True)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    out = capsys.readouterr().out
    rows = dict(line.split(None, 1) for line in out.splitlines() if not line.startswith(("TF ", "sys.")))
    assert rows["numpy"] == np.__version__ and rows["RANK"] == "3"
    assert " GB free of " in rows["RAM"]
    assert "rank 3 of 4" in rows["placement"]
    gpus = tf.config.list_physical_devices("GPU")
    last = out.splitlines()[-1 - len(gpus)]
    assert last == (f"TensorFlow sees {len(gpus)} GPU(s):" if gpus else "TensorFlow sees no GPU")
