"""Hyperparameter setters, inference runners, notifications and resource trackers under the real trainer."""

from __future__ import annotations

import logging

import numpy as np
import psutil
import pytest
from sklearn.metrics import precision_score, recall_score

from support.callback_runs import RecordLR, train_classifier
from support.trainer_models import ArrayBatches, SoftmaxClassifier, blobs
from towerpack.trainer import (
    BinaryClassificationStats,
    ClassificationError,
    DataParallelInferenceRunner,
    GPUMemoryTracker,
    GPUUtilizationTracker,
    HostMemoryTracker,
    HumanHyperParamSetter,
    InferenceRunner,
    InferenceRunnerBase,
    PeakMemoryTracker,
    ScalarStats,
    SendMonitorData,
    SendStat,
    StatMonitorParamSetter,
)
from towerpack.trainer.callbacks.base import Callback
from towerpack.trainer.compat import tf, tfv1

pytestmark = pytest.mark.usefixtures("graph")

X, LABEL = blobs(256, seed=4)


def train(callbacks, steps=4, epochs=3, monitors=None, model=None):
    return train_classifier(callbacks, X, LABEL, steps, epochs, model=model, monitors=monitors)


def test_human_setter_reads_the_file_before_training_and_after_each_epoch(logdir, caplog):
    hyper = logdir / "hyper.txt"
    hyper.write_text("learning_rate: 0.05\nthis line is bad\n")

    class Edit(Callback):  # registered before the setter: edits the file at the end of epoch 1
        def _trigger_epoch(self):
            if self.epoch_num == 1:
                hyper.write_text("momentum:0.5\nlearning_rate:0.02\n")
            if self.epoch_num == 2:
                hyper.write_text("momentum:0.5\n")

    rec = RecordLR()
    with caplog.at_level(logging.WARNING, logger="towerpack.trainer"):
        train([Edit(), HumanHyperParamSetter("learning_rate"), rec])
    assert rec.values == {1: 0.05, 2: 0.02, 3: 0.02}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("line 2 is not 'name:value'" in w for w in warnings)
    assert any("has no line for 'learning_rate'" in w for w in warnings)


def test_human_setter_needs_a_log_dir_or_an_absolute_path(tmp_path):
    with pytest.raises(ValueError, match="set_logger_dir"):
        HumanHyperParamSetter("learning_rate")
    assert HumanHyperParamSetter("learning_rate", str(tmp_path / "h.txt")).file_name == str(
        tmp_path / "h.txt"
    )


class ReportStat(Callback):
    """Puts a scalar ``stat`` with a given value after each epoch (before the setters run)."""

    def __init__(self, values):
        self.values = values

    def _trigger_epoch(self):
        if self.epoch_num in self.values:
            self.trainer.monitors.put_scalar("stat", self.values[self.epoch_num])


def test_stat_monitor_setter_acts_on_a_plateau(caplog):
    rec = RecordLR()
    # Improves by more than the threshold until epoch 3, then stalls: the window [3, 4, 5] has no
    # value below 0.5 - 0.1; epoch 6 is not reported (skipped with a warning).
    stats = ReportStat({1: 1.0, 2: 0.8, 3: 0.5, 4: 0.48, 5: 0.45, 7: 0.44})
    setter = StatMonitorParamSetter("learning_rate", "stat", lambda lr: lr / 10, threshold=0.1, last_k=3)
    with caplog.at_level(logging.WARNING, logger="towerpack.trainer"):
        train([stats, setter, rec], steps=1, epochs=8)
    assert rec.values == {1: 0.1, 2: 0.1, 3: 0.1, 4: 0.1, 5: 0.1, 6: 0.01, 7: 0.01, 8: 0.01}
    assert any("no new value of 'stat'" in r.getMessage() for r in caplog.records)


def test_stat_monitor_setter_reverse_waits_for_a_full_window_again():
    rec = RecordLR()
    stats = ReportStat({e: 0.9 for e in range(1, 8)})  # accuracy that does not go up
    setter = StatMonitorParamSetter(
        "learning_rate", "stat", lambda lr: lr * 2, threshold=0.01, last_k=2, reverse=True
    )
    train([stats, setter, rec], steps=1, epochs=6)
    # Full windows at epochs 2, 4, 6 (the window starts over after each change).
    assert rec.values == {1: 0.1, 2: 0.1, 3: 0.2, 4: 0.2, 5: 0.4, 6: 0.4}


class BinaryModel(SoftmaxClassifier):
    """Also has 0/1 vectors ``pred_pos`` (predicted class 0) and ``label_pos`` (label 0), and
    ``incorrect`` (1 per misclassified example)."""

    def build_graph(self, x, label):
        w = tfv1.get_variable("W", [self.dim, self.classes], initializer=tfv1.zeros_initializer())
        b = tfv1.get_variable("b", [self.classes], initializer=tfv1.zeros_initializer())
        logits = tf.matmul(x, w) + b
        predicted = tf.argmax(logits, axis=1, output_type=tf.int32)
        tf.cast(tf.equal(predicted, 0), tf.int32, name="pred_pos")
        tf.cast(tf.equal(label, 0), tf.int32, name="label_pos")
        tf.cast(tf.not_equal(predicted, label), tf.float32, name="incorrect")
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=logits)
        return tf.reduce_mean(losses, name="cost")


def test_binary_classification_stats_match_sklearn():
    rng = np.random.RandomState(0)
    stats = BinaryClassificationStats("p", "l", prefix="v")
    stats.before_inference()
    preds, labels = [], []
    for _ in range(4):
        p, lab = rng.randint(0, 2, 50), rng.randint(0, 2, 50)
        stats.on_fetches([p, lab])
        preds.append(p)
        labels.append(lab)
    got = stats.after_inference()
    p, lab = np.concatenate(preds), np.concatenate(labels)
    assert got == pytest.approx({"v_precision": precision_score(lab, p), "v_recall": recall_score(lab, p)})
    stats.before_inference()
    stats.on_fetches([np.zeros(5), np.zeros(5)])
    assert stats.after_inference() == {"v_precision": 0.0, "v_recall": 0.0}
    with pytest.raises(ValueError, match="differ in shape"):
        stats.on_fetches([np.zeros(5), np.zeros(4)])


class RunCounter(tfv1.train.SessionRunHook):
    def __init__(self):
        self.runs = 0

    def after_run(self, run_context, run_values):
        self.runs += 1


def test_inference_runners_one_tower_and_data_parallel_agree_with_a_direct_evaluation():
    x_val, label_val = blobs(250, seed=5)  # 5 batches of 50: 2 parallel runs of 2 towers + 1 alone
    infs = lambda prefix: [
        ScalarStats(["cost"], prefix=prefix),
        ClassificationError("incorrect", f"{prefix}_error"),
        BinaryClassificationStats("pred_pos", "label_pos", prefix=prefix),
    ]
    single = InferenceRunner(ArrayBatches(x_val, label_val, batch_size=50), infs("one"))
    parallel = DataParallelInferenceRunner(ArrayBatches(x_val, label_val, batch_size=50), infs("dp"), gpus=2)
    single_hook, parallel_hook = RunCounter(), RunCounter()
    single.register_hook(single_hook)
    parallel.register_hook(parallel_hook)
    direct = {}

    class Direct(Callback):
        def _setup_graph(self):
            self.pred = self.trainer.get_predictor(
                ["x", "label"], ["cost", "pred_pos", "label_pos", "incorrect"]
            )

        def _trigger(self):
            costs, pred, lab, wrong = [], [], [], []
            for k in range(5):
                c, p, lb, w = self.pred(x_val[50 * k : 50 * (k + 1)], label_val[50 * k : 50 * (k + 1)])
                costs.append(c)
                pred.append(p)
                lab.append(lb)
                wrong.append(w)
            p, lb = np.concatenate(pred), np.concatenate(lab)
            direct[self.epoch_num] = {
                "cost": np.mean(costs),
                "error": np.concatenate(wrong).mean(),
                "precision": precision_score(lb, p, zero_division=0),
                "recall": recall_score(lb, p, zero_division=0),
            }

    trainer = train([single, parallel, Direct()], epochs=2, model=BinaryModel())
    for prefix in ("one", "dp"):
        for key in ("cost", "error", "precision", "recall"):
            history = trainer.monitors.get_history(f"{prefix}_{key}")
            assert [s for s, _ in history] == [4, 8]
            assert [v for _, v in history] == pytest.approx([direct[1][key], direct[2][key]], rel=1e-5), (
                prefix,
                key,
            )
    assert single_hook.runs == 2 * 5 and parallel_hook.runs == 2 * 3
    assert isinstance(parallel, InferenceRunnerBase) and parallel.chief_only
    names = {op.name.split("/")[0] for op in tfv1.get_default_graph().get_operations()}
    assert {"InferenceTower", "InferenceTower0", "InferenceTower1"} <= names


def test_data_parallel_runner_needs_a_sized_queue_input():
    class Endless:
        def reset_state(self):
            pass

        def __iter__(self):
            yield [X[:2], LABEL[:2]]

    with pytest.raises(ValueError, match="known, non-zero size"):
        DataParallelInferenceRunner(
            ArrayBatches(X[:10], LABEL[:10], batch_size=50), [ScalarStats("cost")], gpus=2
        )
    with pytest.raises(TypeError, match="QueueInput or a DataFlow"):
        DataParallelInferenceRunner([1], [ScalarStats("cost")], gpus=2)
    with pytest.raises(ValueError, match="known, non-zero size"):
        DataParallelInferenceRunner(Endless(), [ScalarStats("cost")], gpus=2)


def test_send_stat_and_send_monitor_data_run_commands_with_the_values(tmp_path, caplog):
    out_stat, out_data = tmp_path / "stat.txt", tmp_path / "data.txt"
    cbs = [
        SendStat(f"echo epoch-end {{cost:.4f}} {{accuracy:.4f}} >> {out_stat}", ["cost", "accuracy"]),
        SendStat("exit 3", "cost"),
    ]
    monitor = SendMonitorData(f"echo {{cost:.4f}} >> {out_data}", "cost")
    with caplog.at_level(logging.ERROR, logger="towerpack.trainer"):
        trainer = train(cbs, epochs=2, monitors=[monitor])
    costs = [v for _, v in trainer.monitors.get_history("cost")]
    accuracies = [v for _, v in trainer.monitors.get_history("accuracy")]
    lines = out_stat.read_text().splitlines()
    assert lines == [f"epoch-end {c:.4f} {a:.4f}" for c, a in zip(costs, accuracies, strict=True)]
    assert out_data.read_text().splitlines() == [f"{c:.4f}" for c in costs]
    assert sum("'exit 3' failed with exit code 3" in r.getMessage() for r in caplog.records) == 2


def test_resource_trackers_on_a_machine_without_gpus(caplog):
    with caplog.at_level(logging.WARNING, logger="towerpack.trainer"):
        trainer = train([GPUUtilizationTracker(), GPUMemoryTracker(), HostMemoryTracker()], epochs=2)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    gpu_util = [w for w in warnings if w.startswith("GPUUtilizationTracker")]
    assert gpu_util == [
        "GPUUtilizationTracker is off (it reports nothing): NVML does not start (NVML Shared Library "
        "Not Found): this machine has no NVIDIA driver, or no GPU"
    ]
    assert any(w.startswith("GPUMemoryTracker: no GPU is visible") for w in warnings)
    assert not [
        n for n in trainer.monitors._scalar_history.names() if n.startswith(("GPUUtil", "PeakMemory"))
    ]
    free = trainer.monitors.get_history("HostFreeMemory (GB)")
    assert [s for s, _ in free] == [4, 8]
    now = psutil.virtual_memory().available / 1024**3
    assert all(abs(v - now) < 0.25 * now for _, v in free)
    assert PeakMemoryTracker is GPUMemoryTracker
    assert not GPUUtilizationTracker().chief_only and not HostMemoryTracker().chief_only
