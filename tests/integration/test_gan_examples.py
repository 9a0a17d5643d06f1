"""The image GAN examples (examples/gan/dcgan.py, wgan_gp.py) and the trainers they share
(examples/gan/gan_base.py): short real trainings in a subprocess, then the parts users rely on
checked in this process on tiny graphs (the gradient penalty, the step ratio, towers)."""

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from support.launcher_run import launch
from towerpack.dataflow import BatchData, DataFromList
from towerpack.trainer import Callback, FullyConnected, QueueInput
from towerpack.trainer.compat import tf, tfv1

GAN_DIR = Path(__file__).resolve().parents[2] / "examples" / "gan"


def _example_module(name: str):
    """A module of examples/gan, loaded under a name of its own (sys.path stays as it is)."""
    spec = importlib.util.spec_from_file_location(f"gan_example_{name}", GAN_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gan_base = _example_module("gan_base")

ENV = {"TF_CPP_MIN_LOG_LEVEL": "2"}
SHORT = ["--steps", "12", "--width", "16"]  # --short without its cap of 3 epochs: runs can resume
GRID = 8 * 32 + 7 * 2  # 8x8 images of 32 pixels, 2 pixels apart


def run(script: str, *args: str, cwd: Path, timeout: float = 100) -> str:
    proc = subprocess.run(
        [sys.executable, str(GAN_DIR / script), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **ENV},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout


def epoch_records(logdir: Path) -> list[dict]:
    return [r for r in json.loads((logdir / "stats.json").read_text()) if "epoch_num" in r]


def check_samples(logdir: Path, records: list[dict]) -> None:
    """One PNG grid per epoch, named after the global step at its end."""
    for r in records:
        image = cv2.imread(str(logdir / f"samples-{r['global_step']}.png"))
        assert image is not None and image.shape == (GRID, GRID, 3), r


def variable_names(logdir: Path) -> set[str]:
    return {name for name, _ in tf.train.list_variables(str(logdir))}


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_dcgan_short_run(tmp_path):
    out = run("dcgan.py", "--short", cwd=tmp_path)
    logdir = tmp_path / "train_log" / "dcgan"
    assert "Trained DCGAN on 1 tower(s) for 3 epochs (this run: 3 epoch(s), 36 step(s)" in out, out
    assert f"samples: {Path('train_log', 'dcgan', 'samples-36.png')}" in out
    records = epoch_records(logdir)
    assert [r["global_step"] for r in records] == [12, 24, 36]
    d_loss = [r["GAN_loss/d_loss"] for r in records]
    g_loss = [r["GAN_loss/g_loss"] for r in records]
    assert all(math.isfinite(v) for v in d_loss + g_loss), records
    # The discriminator learns first: its loss falls below chance (log 2) while the generator's rises.
    assert d_loss[-1] < d_loss[0] and d_loss[-1] < math.log(2) - 0.1, d_loss
    assert g_loss[-1] > g_loss[0], g_loss
    check_samples(logdir, records)
    names = variable_names(logdir)
    expected = {
        "gen/fc0/W", "gen/bn/mean/EMA", "gen/deconv1/W", "gen/deconv1/bn/gamma", "gen/deconv3/W",
        "discrim/conv0/W", "discrim/conv1/W", "discrim/bn1/beta", "discrim/bn2/variance/EMA",
        "discrim/fct/W", "gen/fc0/W/Adam", "discrim/fct/W/Adam_1",
        "optimize/gen/beta1_power", "optimize/discrim/beta1_power", "global_step",
    }  # fmt: skip
    assert expected <= names, sorted(expected - names)


def rank0_output(stdout: str) -> str:
    """Rank 0's lines of a launcher's output, without the ``[host:rank]`` prefix."""
    return "\n".join(m.group(1) for m in re.finditer(r"^\[[^\]\s]+:0\] ?(.*)$", stdout, re.MULTILINE))


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.horovod
@pytest.mark.timeout(150)
def test_wgan_gp_short_run_then_resume_on_two_processes(tmp_path, horovod_required):
    """A WGAN-GP run of 2 epochs; the same command for 4 epochs continues it on 2 Horovod processes."""
    out = run("wgan_gp.py", *SHORT, "--epochs", "2", cwd=tmp_path)
    logdir = tmp_path / "train_log" / "wgan-gp"
    first = epoch_records(logdir)
    # 12 critic steps per epoch; the generator's at steps 0, 5, 10 and then 15, 20.
    assert [r["global_step"] for r in first] == [15, 29], first
    assert "on 1 tower(s) for 2 epochs (this run: 2 epoch(s), 29 step(s)" in out, out
    keys = ["d_loss", "g_loss", "wasserstein_distance", "gradient_penalty", "gradient_norm"]
    for r in first:
        assert all(math.isfinite(r[f"WGAN_loss/{k}"]) for k in keys), r
    assert {"gen/deconv3/W", "discrim/ln2/gamma", "optimize/gen/beta2_power"} <= variable_names(logdir)

    script = str(GAN_DIR / "wgan_gp.py")
    proc = launch("--np", "2", script, *SHORT, "--epochs", "4", cwd=tmp_path, env=ENV, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = rank0_output(proc.stdout)
    ckpt = Path("train_log", "wgan-gp", "model-29")
    assert out.splitlines()[0] == f"resuming from {ckpt} at epoch 3 of 4", out[:500]
    assert "on 2 process(es) for 4 epochs (this run: 2 epoch(s), 29 step(s)" in out, out
    records = epoch_records(logdir)
    assert records[:2] == first
    # Both ranks run the critic at every step and the generator at steps 25, 30, 35, 40, 45.
    assert [r["global_step"] for r in records[2:]] == [44, 58], records
    check_samples(logdir, records)
    distance = [r["WGAN_loss/wasserstein_distance"] for r in records]
    # The critic learns to tell real from fake: its estimate of the distance grows from about 0.
    assert distance[-1] > max(0.5, distance[0]), distance
    assert all(r["WGAN_loss/gradient_penalty"] < 2.0 for r in records), records


# ---- the shared trainers on tiny graphs -----------------------------------------------------------


@pytest.fixture
def graph():
    with tf.Graph().as_default() as g:
        yield g


def test_gradient_penalty_matches_finite_differences(graph):
    rng = np.random.RandomState(0)
    w, v = rng.randn(12, 5), rng.randn(5)
    real, fake = rng.randn(3, 2, 2, 3), rng.randn(3, 2, 2, 3)
    alpha = rng.uniform(size=(3, 1, 1, 1))

    def critic_np(x):
        return np.tanh(x.reshape(len(x), -1) @ w) @ v

    def critic_tf(x):
        return tf.tanh(tf.reshape(x, [-1, 12]) @ w) @ v[:, None]

    penalty, norms = gan_base.gradient_penalty(
        critic_tf, tf.constant(real), tf.constant(fake), tf.constant(alpha)
    )
    with tfv1.Session() as sess:
        penalty, norms = sess.run([penalty, norms])

    x = real + alpha * (fake - real)
    eps = 1e-6
    grads = np.zeros_like(x)
    for index in np.ndindex(*x.shape[1:]):
        step = np.zeros_like(x)
        step[(slice(None), *index)] = eps
        grads[(slice(None), *index)] = (critic_np(x + step) - critic_np(x - step)) / (2 * eps)
    expected_norms = np.sqrt((grads**2).reshape(3, -1).sum(axis=1))
    np.testing.assert_allclose(norms, expected_norms, rtol=1e-6)
    np.testing.assert_allclose(penalty, np.mean((expected_norms - 1) ** 2), rtol=1e-6)
    assert penalty > 0.01  # a case where the penalty is not trivially zero


class TinyGAN(gan_base.GANModelDesc):
    """2-D points from 2-D noise, both read from the input so that runs can be compared exactly."""

    def __init__(self, seed: int = 0):
        rng = np.random.RandomState(seed)
        self.init = {name: rng.randn(*shape) * 0.5 for name, shape in [("g", (2, 2)), ("d", (2, 1))]}

    def inputs(self):
        return [tf.TensorSpec([None, 2], tf.float32, "real"), tf.TensorSpec([None, 2], tf.float32, "z")]

    def build_graph(self, real, z):
        dense = lambda name, x, out, key: FullyConnected(
            name, x, out, kernel_initializer=tfv1.constant_initializer(self.init[key])
        )
        with tfv1.variable_scope("gen"):
            fake = dense("fc", z, 2, "g")
        with tfv1.variable_scope("discrim"):
            logits_real = dense("fc", real, 1, "d")
        with tfv1.variable_scope("discrim", reuse=True):
            logits_fake = dense("fc", fake, 1, "d")
        self.build_losses(logits_real, logits_fake)
        self.collect_variables()

    def optimizer(self):
        return tfv1.train.AdamOptimizer(0.05)


def tiny_data(batch_size: int, n: int = 48):
    rng = np.random.RandomState(1)
    points = [[rng.randn(2).astype(np.float32) + 2, rng.randn(2).astype(np.float32)] for _ in range(n)]
    return QueueInput(BatchData(DataFromList(points, shuffle=False), batch_size))


class RecordRuns(Callback):
    """What each hooked run fetched, and the trainable variables at the end."""

    def __init__(self):
        self.runs, self.weights = [], {}

    def _before_run(self, ctx):
        self.runs.append(ctx.original_args.fetches)

    def _after_train(self):
        variables = tfv1.trainable_variables()
        self.weights = dict(
            zip([v.op.name for v in variables], self.trainer.sess.run(variables), strict=True)
        )


def test_separate_trainer_keeps_the_step_ratio(graph):
    trainer = gan_base.SeparateGANTrainer(tiny_data(4), TinyGAN(), d_period=1, g_period=3)
    record = RecordRuns()
    trainer.train_with_defaults(callbacks=[record], steps_per_epoch=7, max_epoch=2, extra_callbacks=[])
    d, g = trainer.d_min, trainer.g_min
    # 14 steps: the critic at every one, the generator after it at steps 0, 3, 6, 9, 12.
    expected = [op for step in range(14) for op in ([d, g] if step % 3 == 0 else [d])]
    assert record.runs == expected
    assert trainer.global_step == 19


def test_two_towers_train_like_one_tower_at_twice_the_batch():
    weights = {}
    for towers, batch in ((1, 8), (2, 4)):
        with tf.Graph().as_default():
            trainer = gan_base.GANTrainer(tiny_data(batch), TinyGAN(), towers=towers)
            record = RecordRuns()
            trainer.train_with_defaults(
                callbacks=[record], steps_per_epoch=5, max_epoch=1, extra_callbacks=[]
            )
            weights[towers] = record.weights
    assert set(weights[1]) == set(weights[2]) == {"gen/fc/W", "gen/fc/b", "discrim/fc/W", "discrim/fc/b"}
    for name, value in weights[1].items():
        np.testing.assert_allclose(weights[2][name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    initial = TinyGAN().init["g"]
    assert not np.allclose(weights[1]["gen/fc/W"], initial, atol=1e-3)  # it trained


def test_mistakes_are_named(graph):
    with pytest.raises(ValueError, match="g_period must be an integer >= 1, got 0"):
        gan_base.SeparateGANTrainer(tiny_data(4), TinyGAN(), g_period=0)

    class Unscoped(TinyGAN):
        def build_graph(self, real, z):
            with tfv1.variable_scope("generator"):
                FullyConnected("fc", z, 2)
            self.collect_variables()

    with pytest.raises(ValueError, match="no trainable variable under the variable scope 'gen'"):
        gan_base.GANTrainer(tiny_data(4), Unscoped())
