"""Names tensorpack removed before 0.11 that older scripts still use: their values in real graphs, the
names of what they create, the warning naming the replacement, and the star imports that give them."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import numpy as np
import pytest

from support.trainer_models import ArrayBatches, LinearRegression, linear_data
from towerpack.port.codemod import port_text
from towerpack.port.reference_map import REFERENCE
from towerpack.trainer import (
    JustCurrentSession,
    SaverRestore,
    ScheduledHyperParamSetter,
    SimpleTrainer,
    TrainConfig,
    TryResumeTraining,
    launch_train_with_config,
)
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.models import BilinearUpSample, ImageSample, SoftMax
from towerpack.trainer.symbolic_functions import (
    accuracy,
    batch_flatten,
    class_balanced_cross_entropy,
    class_balanced_sigmoid_cross_entropy,
    flatten,
    get_scalar_var,
    guided_relu,
    huber_loss,
    prediction_incorrect,
    saliency_map,
    shapeless_placeholder,
)
from towerpack.trainer.varmanip import dump_chkpt_vars, load_chkpt_vars

pytestmark = pytest.mark.usefixtures("graph")


def _run(fetches, feed=None):
    with tfv1.Session() as sess:
        sess.run(tfv1.global_variables_initializer())
        return sess.run(fetches, feed)


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


OLDER_SCRIPT = """\
from towerpack.trainer.compat import tf
from towerpack.trainer.models import ImageSample
from towerpack.trainer.symbolic_functions import get_scalar_var, guided_relu, prediction_incorrect

with tf.Graph().as_default():
    for _ in range(3):
        prediction_incorrect(tf.constant([[1.0, 2.0]]), tf.constant([1]))
    get_scalar_var("lr", 0.1)
    with guided_relu():
        pass
    ImageSample("s", [tf.zeros([1, 2, 2, 1]), tf.zeros([1, 1, 1, 2])])
"""


@pytest.mark.timeout(120)
def test_each_kept_name_warns_once_where_it_is_used_naming_the_maps_replacement(tmp_path):
    script = tmp_path / "older.py"
    script.write_text(OLDER_SCRIPT)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=110)
    assert run.returncode == 0, run.stderr[-3000:]
    warned = [line.split(" WARNING ", 1)[1] for line in run.stderr.splitlines() if "[Deprecated]" in line]
    older = REFERENCE["tensorpack.tfutils.symbolic_functions"].older
    expected = [
        ("tensorpack.tfutils.symbolic_functions.prediction_incorrect", 7, older["prediction_incorrect"]),
        ("tensorpack.tfutils.symbolic_functions.get_scalar_var", 8, older["get_scalar_var"]),
        ("tensorpack.tfutils.symbolic_functions.guided_relu", 9, older["guided_relu"]),
        ("tensorpack.models.ImageSample", 11, REFERENCE["tensorpack.models"].older["ImageSample"]),
    ]
    assert warned == [
        f"[Deprecated] {name} ({script}:{line}) was removed from tensorpack before 0.11 (towerpack keeps it "
        f"for older code): use {advice}"
        for name, line, advice in expected
    ]
    assert "tf.get_variable(name, initializer=float(init_value), trainable=False)" in warned[1]


def test_prediction_incorrect_and_accuracy():
    logits = tf.constant([[1.0, 3.0, 2.0], [5.0, 0.0, 1.0], [0.0, 1.0, 2.0]])
    label = tf.constant([1, 2, 0])
    top1 = prediction_incorrect(logits, label)
    top2 = prediction_incorrect(logits, label, topk=2, name="wrong_top2")
    acc = accuracy(logits, label)
    assert (top1.op.name, top2.op.name, acc.op.name) == ("incorrect_vector", "wrong_top2", "accuracy")
    assert top1.dtype == tf.float32
    values = _run([top1, top2, acc])
    assert values[0].tolist() == [0, 1, 1] and values[1].tolist() == [0, 0, 1]
    assert values[2] == pytest.approx(1 / 3)


def test_flatten_and_batch_flatten_keep_what_the_static_shape_knows():
    x = tfv1.placeholder(tf.float32, [None, 2, 3])
    unknown = tfv1.placeholder(tf.float32, [None, None, 3])
    assert batch_flatten(x).shape.as_list() == [None, 6]
    assert batch_flatten(unknown).shape.as_list() == [None, None]
    value = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    flat, rows, rows_unknown = _run(
        [flatten(x), batch_flatten(x), batch_flatten(unknown)], {x: value, unknown: value}
    )
    assert flat.tolist() == list(range(12))
    assert rows.tolist() == rows_unknown.tolist() == value.reshape(2, 6).tolist()


def test_huber_loss_is_elementwise():
    x = tf.constant([-3.0, -0.5, 0.0, 0.5, 2.0])
    wide = huber_loss(x, delta=2.5, name="wide")
    loss = huber_loss(x)
    assert wide.op.name == "wide" and "huber_loss/Abs" in {
        op.name for op in tfv1.get_default_graph().get_operations()
    }
    values = _run([loss, wide])
    np.testing.assert_allclose(values[0], [2.5, 0.125, 0.0, 0.125, 1.5])
    np.testing.assert_allclose(values[1], [2.5 * 3 - 2.5**2 / 2, 0.125, 0.0, 0.125, 2.0])


def test_get_scalar_var_makes_a_named_untrainable_variable_and_its_summary():
    lr = get_scalar_var("learning_rate", 0.1, summary=True)
    momentum = get_scalar_var("momentum", 1, trainable=True)
    assert (lr.name, lr.dtype.base_dtype, lr.shape.as_list()) == ("learning_rate:0", tf.float32, [])
    assert lr not in tfv1.trainable_variables() and momentum in tfv1.trainable_variables()
    (summary_op,) = tfv1.get_collection(tfv1.GraphKeys.SUMMARIES)
    value, serialized = _run([lr, summary_op])
    assert value == pytest.approx(0.1)
    summary = tfv1.Summary.FromString(serialized)
    assert [(v.tag, round(v.simple_value, 6)) for v in summary.value] == [("learning_rate-summary", 0.1)]


class _OlderLinearRegression(LinearRegression):
    """A model as 0.8-era scripts wrote its optimizer: the learning rate from get_scalar_var."""

    def optimizer(self):
        return tfv1.train.GradientDescentOptimizer(get_scalar_var("learning_rate", 0.05, summary=True))


def test_a_get_scalar_var_learning_rate_is_set_by_callbacks_and_its_summary_reaches_the_monitors(graph):
    x, y, _ = linear_data(64, seed=2)
    config = TrainConfig(
        model=_OlderLinearRegression(),
        dataflow=ArrayBatches(x, y, batch_size=16),
        callbacks=[ScheduledHyperParamSetter("learning_rate", [(2, 0.01)])],
        max_epoch=3,
        monitors=[],
    )
    trainer = SimpleTrainer()
    launch_train_with_config(config, trainer)
    # Summaries are taken with each epoch's last step; the setter acts after epoch 2. The monitors
    # drop the "-summary" of the tag, as the reference's did.
    history = trainer.monitors.get_history("learning_rate")
    assert [round(v, 6) for _, v in history] == [0.05, 0.05, 0.01]


def test_class_balanced_cross_entropies_match_their_formulas():
    rng = np.random.RandomState(0)
    logits = rng.normal(size=(2, 3, 4)).astype(np.float32)
    labels = (rng.uniform(size=(2, 3, 4)) < 0.25).astype(np.int32)
    beta = (labels == 0).mean()
    p = _sigmoid(logits.astype(np.float64))
    y = labels.astype(np.float64)
    expected = -beta * np.mean(y * np.log(p + 1e-12)) - (1 - beta) * np.mean((1 - y) * np.log(1 - p + 1e-12))
    per_element = beta / (1 - beta) * y * -np.log(p) + (1 - y) * -np.log(1 - p)
    expected_sigmoid = np.mean(per_element * (1 - beta))

    ce = class_balanced_cross_entropy(tf.sigmoid(tf.constant(logits)), tf.constant(labels))
    sce = class_balanced_sigmoid_cross_entropy(tf.constant(logits), tf.constant(labels), name="hed_loss")
    no_positive = class_balanced_sigmoid_cross_entropy(
        tf.constant(logits), tf.zeros_like(labels), name="none"
    )
    assert (ce.op.name, sce.op.name) == ("cross_entropy_loss", "hed_loss")
    values = _run([ce, sce, no_positive])
    assert values == pytest.approx([expected, expected_sigmoid, 0.0], rel=1e-5)


def test_guided_relu_passes_only_positive_gradients_where_the_relu_was_active():
    x = tf.constant([-1.0, 2.0, 3.0, 4.0])
    upstream = tf.constant([5.0, -1.0, 2.0, 0.5])
    plain = tf.gradients(tf.reduce_sum(tf.nn.relu(x) * upstream), x)[0]
    with guided_relu():
        guided = tf.gradients(tf.reduce_sum(tf.nn.relu(x) * upstream), x)[0]
    with guided_relu():  # a second use (the gradient is registered once)
        again = tf.gradients(tf.reduce_sum(tf.nn.relu(x) * upstream), x)[0]
    values = _run([plain, guided, again])
    assert values[0].tolist() == [0.0, -1.0, 2.0, 0.5]
    assert values[1].tolist() == values[2].tolist() == [0.0, 0.0, 2.0, 0.5]


def test_saliency_map_is_the_gradient_of_each_rows_largest_output():
    w = np.array([[1.0, -2.0, 0.5], [3.0, 1.0, -1.0]], np.float32)
    x = tfv1.placeholder(tf.float32, [None, 2], name="image")
    out = tf.matmul(x, w)
    saliency = saliency_map(out, x)
    assert saliency.op.name == "saliency_map"
    value = _run(saliency, {x: [[1.0, 1.0], [-1.0, 0.0]]})
    # Row 0's largest output is column 0 (4.0), row 1's column 1 (2.0): their weight columns.
    np.testing.assert_allclose(value, [w[:, 0], w[:, 1]])


def test_shapeless_placeholder_defaults_to_x_and_takes_other_shapes():
    x = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    p = shapeless_placeholder(x, 0, name="feedable")
    both = shapeless_placeholder(x, [0, 1], name="both")
    assert p.op.name == "feedable" and p.shape.as_list() == [None, 3] and both.shape.as_list() == [None, None]
    assert _run(p).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert _run(p * 2, {p: [[1.0, 1.0, 1.0]]}).tolist() == [[2, 2, 2]]
    with pytest.raises(ValueError, match=r"axis 0 of shape \[None, 3\] is already unknown"):
        shapeless_placeholder(p, 0, name="again")


def _bilinear_sample(image, coords, constant):
    """numpy: each (y, x) of coords sampled from NHWC image by bilinear interpolation; positions
    are clamped to the image, or give 0 outside it when ``constant``."""
    _, h, w, _ = image.shape
    out = np.zeros(coords.shape[:3] + image.shape[3:], np.float64)
    for b, i, j in np.ndindex(*coords.shape[:3]):
        y, x = coords[b, i, j]
        if constant and not (0 <= y <= h - 1 and 0 <= x <= w - 1):
            continue
        y, x = max(y, 0.0), max(x, 0.0)
        y0, x0 = int(np.floor(y)), int(np.floor(x))
        fy, fx = y - y0, x - x0
        for dy, dx, weight in (
            (0, 0, (1 - fy) * (1 - fx)),
            (0, 1, (1 - fy) * fx),
            (1, 0, fy * (1 - fx)),
            (1, 1, fy * fx),
        ):
            out[b, i, j] += weight * image[b, min(y0 + dy, h - 1), min(x0 + dx, w - 1)]
    return out


@pytest.mark.parametrize("mode", ["repeat", "constant"])
def test_image_sample_interpolates_bilinearly(mode):
    rng = np.random.RandomState(1)
    image = rng.uniform(size=(2, 4, 5, 3)).astype(np.float32)
    coords = (rng.uniform(-1.5, 6.5, size=(2, 3, 4, 2))).astype(np.float32)
    coords[0, 0, 0] = [1.0, 2.0]  # an integer position gives that pixel
    out = ImageSample("sample", [tf.constant(image), tf.constant(coords)], borderMode=mode)
    assert out.op.name == "sample/output" and out.shape.as_list() == [2, 3, 4, 3]
    value = _run(out)
    np.testing.assert_allclose(value, _bilinear_sample(image, coords, mode == "constant"), atol=1e-5)
    np.testing.assert_allclose(value[0, 0, 0], image[0, 1, 2], atol=1e-6)
    with pytest.raises(ValueError, match="borderMode must be one of"):
        ImageSample("bad", [tf.constant(image), tf.constant(coords)], borderMode="wrap")


def _upsample_1d(a, factor, axis):
    """numpy: bilinear upsampling along ``axis`` between pixel centres, edges repeated."""
    n = a.shape[axis]
    src = np.clip((np.arange(n * factor) + 0.5) / factor - 0.5, 0, n - 1)
    lo = np.floor(src).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    w = (src - lo).reshape([-1 if d == axis else 1 for d in range(a.ndim)])
    return np.take(a, lo, axis) * (1 - w) + np.take(a, hi, axis) * w


def test_bilinear_upsample_interpolates_between_pixel_centres_per_channel():
    image = np.random.RandomState(2).uniform(size=(1, 5, 6, 2)).astype(np.float32)
    x = tfv1.placeholder(tf.float32, [None, 5, 6, 2])
    out = BilinearUpSample("up", x, 3)
    assert out.op.name == "up/output" and out.shape.as_list() == [None, 15, 18, 2]
    expected = _upsample_1d(_upsample_1d(image, 3, 1), 3, 2)
    np.testing.assert_allclose(_run(out, {x: image}), expected, atol=1e-5)


def test_softmax_layer_with_a_learned_temperature():
    logits = tf.constant([[1.0, 2.0, 4.0]])
    plain = SoftMax(logits)
    tempered = SoftMax("sm", logits, use_temperature=True, temperature_init=2.0)
    names = [v.name for v in tfv1.global_variables()]
    assert names == ["sm/invtemp:0"] and tempered.op.name == "sm/output"
    values = _run([plain, tempered])
    e = np.exp([1.0, 2.0, 4.0])
    np.testing.assert_allclose(values[0][0], e / e.sum(), rtol=1e-6)
    h = np.exp([0.5, 1.0, 2.0])
    np.testing.assert_allclose(values[1][0], h / h.sum(), rtol=1e-6)


def test_try_resume_training_restores_the_log_directorys_checkpoint(logdir):
    assert isinstance(TryResumeTraining(), JustCurrentSession)  # no checkpoint yet
    v = tfv1.get_variable("v", initializer=3.0)
    with tfv1.Session() as sess:
        sess.run(v.initializer)
        tfv1.train.Saver().save(sess, str(logdir / "model"), global_step=7)
    assert dump_chkpt_vars(str(logdir)) == pytest.approx(load_chkpt_vars(str(logdir))) == {"v": 3.0}
    init = TryResumeTraining()
    assert isinstance(init, SaverRestore) and init.path == str(logdir / "model-7")
    with tf.Graph().as_default():
        v = tfv1.get_variable("v", initializer=0.0)
        init._setup_graph()
        with tfv1.Session() as sess:
            sess.run(v.initializer)
            init._run_init(sess)
            assert sess.run(v) == 3.0


def test_every_kept_name_is_in_its_homes_star_import_and_a_ported_star_import_gives_it():
    for module, ref in REFERENCE.items():
        # Submodules are imported by their path; a star import never rebinds tf or np.
        kept = [n for n in ref.older if f"{module}.{n}" not in REFERENCE and n not in ("tf", "np")]
        if not kept:
            continue
        home = importlib.import_module(ref.home)
        assert not set(kept) - set(home.__all__), module
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the star import itself warns about nothing
        exec(port_text("from tensorpack.tfutils.symbolic_functions import *\n"), namespace)
        exec(port_text("from tensorpack import *\n"), namespace)
    older = set(REFERENCE["tensorpack.tfutils.symbolic_functions"].older) - {"tf", "np"}
    assert older | {"print_stat", "rms", "ImageSample", "SoftMax", "TryResumeTraining"} <= set(namespace)
    assert namespace["prediction_incorrect"] is prediction_incorrect and "tf" not in namespace
