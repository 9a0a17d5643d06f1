"""Pure logic of the extra callbacks: schedules, inferencer arithmetic, argument checks."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from towerpack.trainer.callbacks.base import Callback
from towerpack.trainer.callbacks.inference import ClassificationError, ScalarStats
from towerpack.trainer.callbacks.inference_runner import InferenceRunner
from towerpack.trainer.callbacks.misc import EstimatedTimeLeft, humanize_seconds
from towerpack.trainer.callbacks.param import ObjAttrParam, ScheduledHyperParamSetter
from towerpack.trainer.callbacks.prof import ThroughputTracker
from towerpack.trainer.callbacks.trigger import PeriodicCallback, PeriodicTrigger
from towerpack.trainer.input_source import QueueInput, StagingInput


class Holder:
    value = 1.0


def test_schedule_steps_without_interpolation():
    s = ScheduledHyperParamSetter(ObjAttrParam(Holder(), "value"), [(0, 1.0), (3, 0.1), (6, 0.01)])
    assert [s.value_at(p) for p in range(8)] == [1.0, 1.0, 1.0, 0.1, 0.1, 0.1, 0.01, 0.01]


def test_schedule_is_sorted_and_numbers_become_floats():
    s = ScheduledHyperParamSetter(ObjAttrParam(Holder(), "value"), [(6, 1), (3, 2), (0, "x")])
    assert s.schedule == [(0, "x"), (3, 2.0), (6, 1.0)]


def test_schedule_linear_interpolation_and_before_first_point():
    s = ScheduledHyperParamSetter(ObjAttrParam(Holder(), "value"), [(2, 1.0), (6, 3.0)], interp="linear")
    assert s.value_at(1) is None  # before the first point: left alone
    assert s.value_at(2) == 1.0
    assert s.value_at(4) == pytest.approx(2.0)
    assert s.value_at(5) == pytest.approx(2.5)
    assert s.value_at(9) == 3.0


@pytest.mark.parametrize(
    ("schedule", "kwargs", "match"),
    [
        ([], {}, "empty"),
        ([(1, 1.0)], {"interp": "cubic"}, "interp"),
    ],
)
def test_schedule_rejects_bad_arguments(schedule, kwargs, match):
    with pytest.raises(ValueError, match=match):
        ScheduledHyperParamSetter(ObjAttrParam(Holder(), "value"), schedule, **kwargs)


def test_a_repeated_schedule_point_keeps_its_first_value_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        s = ScheduledHyperParamSetter(ObjAttrParam(Holder(), "value"), [(3, 1.0), (2, 0.5), (3, 0.1)])
    assert s.schedule == [(2, 0.5), (3, 1.0)]
    assert s.value_at(3) == 1.0
    assert "point(s) [3] appear more than once" in caplog.text


def test_scalar_stats_averages_batches():
    s = ScalarStats(["cost", "accuracy"])
    s.before_inference()
    for cost, acc in [(1.0, 0.5), (3.0, 1.0)]:
        s.on_fetches([np.float32(cost), np.float32(acc)])
    assert s.after_inference() == {"validation_cost": 2.0, "validation_accuracy": 0.75}
    with pytest.raises(ValueError, match="'cost' is not a scalar"):
        s.on_fetches([np.zeros(2), 1.0])


def test_classification_error_weights_examples_not_batches():
    e = ClassificationError("wrong")
    e.before_inference()
    e.on_fetches([np.array([1, 0, 0, 0], np.float32)])  # 1 of 4 wrong
    e.on_fetches([np.array([1, 1], np.float32)])  # 2 of 2 wrong
    assert e.after_inference() == {"validation_error": pytest.approx(0.5)}
    e.before_inference()
    assert e.after_inference() == {}


def test_humanize_seconds():
    assert humanize_seconds(5.25) == "5.2 seconds"
    assert humanize_seconds(42) == "42 seconds"
    assert humanize_seconds(3725) == "1 hour 2 minutes"
    assert humanize_seconds(2 * 86400 + 60) == "2 days 1 minute"


def test_argument_checks_name_the_problem():
    with pytest.raises(ValueError, match="every_k_steps must be a positive integer"):
        PeriodicTrigger(Callback(), every_k_steps=0)
    with pytest.raises(ValueError, match="needs every_k_steps, every_k_epochs or before_train"):
        PeriodicTrigger(Callback())
    with pytest.raises(ValueError, match="needs every_k_steps or every_k_epochs"):
        PeriodicCallback(Callback())
    with pytest.raises(ValueError, match="last_k_epochs"):
        EstimatedTimeLeft(last_k_epochs=0)
    with pytest.raises(ValueError, match="samples_per_step"):
        ThroughputTracker(samples_per_step=0)
    with pytest.raises(TypeError, match="StagingInput"):
        InferenceRunner(StagingInput(QueueInput(_Flow())), [ScalarStats("cost")])
    with pytest.raises(TypeError, match="InputSource or a DataFlow"):
        InferenceRunner([1, 2], [ScalarStats("cost")])
    with pytest.raises(TypeError, match="Inferencers"):
        InferenceRunner(_Flow(), [Callback()])


def test_chief_only_defaults_follow_the_reference():
    assert not ScheduledHyperParamSetter(ObjAttrParam(Holder(), "value"), [(0, 1)]).chief_only
    assert not ThroughputTracker().chief_only
    assert EstimatedTimeLeft().chief_only
    assert InferenceRunner(_Flow(), ScalarStats("cost")).chief_only
    # Wrappers take the wrapped callback's setting.
    assert not PeriodicTrigger(ThroughputTracker(), every_k_steps=2).chief_only


class _Flow:
    def __iter__(self):
        return iter([])

    def __len__(self):
        return 0

    def reset_state(self):
        pass


REFERENCE_CALLBACK_NAMES = [
    "BinaryClassificationStats",
    "CheckNumerics",
    "DataParallelInferenceRunner",
    "DumpParamAsImage",
    "DumpTensor",
    "DumpTensorAsImage",
    "DumpTensors",
    "GPUMemoryTracker",
    "GPUUtilizationTracker",
    "GraphProfiler",
    "HookToCallback",
    "HostMemoryTracker",
    "HumanHyperParamSetter",
    "InferenceRunnerBase",
    "InjectShell",
    "PeakMemoryTracker",
    "ProcessTensors",
    "SendMonitorData",
    "SendStat",
    "SessionRunTimeout",
    "SimpleMovingAverage",
    "StartProcOrThread",
    "StatMonitorParamSetter",
    "TensorPrinter",
]


def test_star_import_gives_the_reference_callbacks_and_mlflow_monitor():
    namespace = {}
    exec("from towerpack.trainer import *", namespace)
    missing = [n for n in [*REFERENCE_CALLBACK_NAMES, "MLflowMonitor"] if n not in namespace]
    assert missing == []
    import towerpack.trainer.callbacks as callbacks

    assert all(getattr(callbacks, n) is namespace[n] for n in REFERENCE_CALLBACK_NAMES)
