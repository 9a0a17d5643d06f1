"""Callbacks that fetch, dump, print and check graph tensors, under the real trainer."""

from __future__ import annotations

import json
import logging
import threading
import time

import numpy as np
import pytest

from support.callback_runs import train_classifier
from support.trainer_models import SoftmaxClassifier, blobs
from towerpack.trainer import (
    CheckNumerics,
    DumpParamAsImage,
    DumpTensor,
    DumpTensorAsImage,
    DumpTensors,
    EnableCallbackIf,
    GraphProfiler,
    HookToCallback,
    MonitorBase,
    ProcessTensors,
    RunOp,
    SessionRunTimeout,
    SimpleMovingAverage,
    StartProcOrThread,
    TensorPrinter,
    TFEventWriter,
)
from towerpack.trainer.callbacks.base import Callback
from towerpack.trainer.compat import tf, tfv1
from towerpack.trainer.input_source import QueueInput

pytestmark = pytest.mark.usefixtures("graph")

X, LABEL = blobs(256, seed=3)


def train(callbacks, steps=4, epochs=2, monitors=None, data=None, model=None):
    return train_classifier(callbacks, X, LABEL, steps, epochs, model=model, data=data, monitors=monitors)


class ImageRecorder(MonitorBase):
    def __init__(self):
        self.images = []

    def process_image(self, name, images):
        self.images.append((name, images))


def test_process_dump_print_and_average_tensors(logdir, caplog):
    seen = []
    sma = SimpleMovingAverage(["cost"], window_size=3)
    callbacks = [
        ProcessTensors(["cost", "W"], lambda cost, w: seen.append((float(cost), w.copy()))),
        DumpTensors(["cost", "W:0"]),
        TensorPrinter(["accuracy"]),
        sma,
    ]
    with caplog.at_level(logging.INFO, logger="towerpack.trainer"):
        trainer = train(callbacks, steps=4, epochs=2, monitors=[])  # no ScalarPrinter lines
    assert len(seen) == 8
    # One file per step, named after the global step once it has been counted.
    for step, (cost, w) in enumerate(seen, start=1):
        dump = np.load(logdir / f"DumpTensor-{step}.npz")
        assert sorted(dump.files) == ["W:0", "cost"]
        assert float(dump["cost"]) == cost
        np.testing.assert_array_equal(dump["W:0"], w)
    assert not (logdir / "DumpTensor-0.npz").exists() and not (logdir / "DumpTensor-9.npz").exists()
    # The SMA of the steps so far (at most 3) every 3 global steps.
    costs = [c for c, _ in seen]
    history = trainer.monitors.get_history("cost/SMA")
    assert [s for s, _ in history] == [3, 6]
    assert [v for _, v in history] == pytest.approx([np.mean(costs[0:3]), np.mean(costs[3:6])], rel=1e-6)
    printed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("accuracy: ")]
    assert len(printed) == 8
    assert any("tf.print" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert DumpTensor is DumpTensors and DumpParamAsImage is DumpTensorAsImage


def test_tensor_callbacks_reject_a_single_name_and_need_a_log_dir():
    with pytest.raises(TypeError, match="list of tensor names"):
        ProcessTensors("cost", print)
    with pytest.raises(TypeError, match="list of tensor names"):
        SimpleMovingAverage("cost", 3)
    with pytest.raises(ValueError, match="set_logger_dir"):
        DumpTensors(["cost"])
    with pytest.raises(ValueError, match="set_logger_dir"):
        DumpTensorAsImage("W")
    with pytest.raises(KeyError, match="no tensor named 'nope:0'"):
        train([ProcessTensors(["nope"], print)])


class ImageModel(SoftmaxClassifier):
    """Adds an input-independent image tensor: 2 images of 2x3 pixels with 3 channels in [0, 1]."""

    def build_graph(self, x, label):
        values = np.linspace(0.0, 1.2, 2 * 2 * 3 * 3).reshape(2, 2, 3, 3).astype(np.float32)
        tf.constant(values, name="images")
        return super().build_graph(x, label)


def test_dump_tensor_as_image_writes_bgr_pngs_and_reports_images(logdir):
    from PIL import Image

    recorder = ImageRecorder()
    epochs = 2
    train(
        [
            DumpTensorAsImage("images", scale=200),
            DumpTensorAsImage("images:0", prefix="first", map_func=lambda v: v[0]),
        ],
        epochs=epochs,
        monitors=[recorder],
        model=ImageModel(),
    )
    values = np.linspace(0.0, 1.2, 2 * 2 * 3 * 3).reshape(2, 2, 3, 3)
    expected = np.clip(values * 200, 0, 255).astype(np.uint8)[..., ::-1]  # saved as BGR
    names = sorted(p.name for p in logdir.glob("*.png"))
    assert names == [
        "first-ep001.png",
        "first-ep002.png",
        "images-ep001-1.png",
        "images-ep001.png",
        "images-ep002-1.png",
        "images-ep002.png",
    ]
    for i, name in enumerate(["images-ep002.png", "images-ep002-1.png"]):
        np.testing.assert_array_equal(np.asarray(Image.open(logdir / name)), expected[i])
    np.testing.assert_array_equal(
        np.asarray(Image.open(logdir / "first-ep001.png")),
        np.clip(values[0] * 255, 0, 255).astype(np.uint8)[..., ::-1],
    )
    assert [n for n, _ in recorder.images] == ["images", "first"] * epochs
    assert recorder.images[0][1].shape == (2, 2, 3, 3)


def test_check_numerics_names_the_bad_variable():
    def poison():
        w = next(v for v in tfv1.global_variables() if v.op.name == "W")
        return tfv1.assign(w, tf.fill(tf.shape(w), np.nan)).op

    with pytest.raises(tf.errors.InvalidArgumentError, match=r"CheckNumerics\['W'\]"):
        # The poison runs at the first trigger; the check right after it.
        train([RunOp(poison, run_before=False), CheckNumerics()], epochs=2)
    assert CheckNumerics().chief_only


def test_check_numerics_passes_on_a_healthy_model_every_step():
    trainer = train([CheckNumerics(run_step=True)], epochs=1)
    assert trainer.global_step == 4


def test_hook_to_callback_drives_a_session_run_hook():
    calls = []

    class Hook(tfv1.train.SessionRunHook):
        def begin(self):
            calls.append("begin")
            self.cost = tf.identity(tfv1.get_default_graph().get_tensor_by_name("cost:0"), name="hook_cost")

        def after_create_session(self, session, coord):
            calls.append(("create", session is not None, coord))

        def before_run(self, run_context):
            return tfv1.train.SessionRunArgs(self.cost)

        def after_run(self, run_context, run_values):
            calls.append(("run", float(run_values.results) > 0))

        def end(self, session):
            calls.append(("end", session is not None))

    cb = HookToCallback(Hook())
    assert not cb.chief_only
    train([cb], steps=3, epochs=1)
    assert calls[0] == "begin" and calls[1] == ("create", True, None)
    assert calls[2:] == [("run", True)] * 3 + [("end", True)]
    assert tfv1.get_default_graph().get_operation_by_name("hook_cost")  # created at the root name scope


def test_graph_profiler_writes_traces_metadata_and_events(logdir):
    from tensorflow.core.protobuf.config_pb2 import RunMetadata

    profiler = EnableCallbackIf(
        GraphProfiler(dump_metadata=True, dump_tracing=True, dump_event=True),
        lambda self: self.epoch_num == 2 and self.local_step == 1,
    )
    train([profiler], steps=3, epochs=2, monitors=[TFEventWriter()])
    # Only the second step of the second epoch was traced: global step 5 once counted.
    assert sorted(p.name for p in logdir.iterdir() if "trace" in p.name or "runmetadata" in p.name) == [
        "chrome-trace-5.json",
        "runmetadata-5.pb",
    ]
    trace = json.loads((logdir / "chrome-trace-5.json").read_text())
    traced = {e["args"]["name"] for e in trace["traceEvents"] if e.get("cat") == "Op"}
    assert any(name.startswith("train_op/") for name in traced)
    metadata = RunMetadata.FromString((logdir / "runmetadata-5.pb").read_bytes())
    assert len(metadata.step_stats.dev_stats) >= 1
    tags = [
        e.tagged_run_metadata.tag
        for f in logdir.glob("events.out.tfevents.*")
        for e in tfv1.train.summary_iterator(str(f))
        if e.HasField("tagged_run_metadata")
    ]
    assert tags == ["trace-5"]


def test_session_run_timeout_ends_a_blocked_step_with_deadline_exceeded():
    class Slow:
        """One quick datapoint, then a long wait: the second step blocks on the empty queue."""

        def __len__(self):
            return 100

        def reset_state(self):
            pass

        def __iter__(self):
            yield [X[:32], LABEL[:32]]
            threading.Event().wait(1.0)
            while True:
                yield [X[:32], LABEL[:32]]

    with pytest.raises(tf.errors.DeadlineExceededError):
        train([SessionRunTimeout(200)], data=QueueInput(Slow()), steps=3, epochs=1)
    with pytest.raises(ValueError, match="positive"):
        SessionRunTimeout(0)


class Stoppable(threading.Thread):
    def __init__(self, name):
        super().__init__(name=name, daemon=True)
        self._event = threading.Event()

    def stop(self):
        self._event.set()

    def run(self):
        self._event.wait()


def _sigint_blocked_in(pid: int) -> bool:
    import signal

    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        mask = int(next(line for line in f if line.startswith("SigBlk:")).split()[1], 16)
    return bool(mask & (1 << (signal.SIGINT - 1)))


def test_start_proc_or_thread_starts_masked_and_stops_what_it_can():
    import multiprocessing as mp

    ctx = mp.get_context("fork")  # (a spawned child starts a new interpreter, with a fresh signal mask)
    proc = ctx.Process(target=time.sleep, args=(600,), name="sleeper", daemon=True)
    stoppable, plain = (
        Stoppable("stoppable"),
        threading.Thread(target=threading.Event().wait, args=(0.2,), name="plain"),
    )
    states = {}

    class Look(Callback):
        def _before_epoch(self):
            states["during"] = (proc.is_alive(), stoppable.is_alive(), _sigint_blocked_in(proc.pid))

    cb = StartProcOrThread([proc, stoppable, plain])
    assert not cb.chief_only
    train([cb, Look()], epochs=1)
    assert states["during"] == (True, True, True)
    assert not proc.is_alive() and proc.exitcode is not None and proc.exitcode < 0  # terminated
    assert not stoppable.is_alive()
    plain.join()
    with pytest.raises(TypeError, match="'name' and 'start\\(\\)'"):
        StartProcOrThread(object())
