"""Callbacks and monitors: everything that runs around the training loop."""

from .base import Callback, CallbackFactory, ProxyCallback
from .distributed_inference import DistributedInferenceRunner
from .graph import RunOp, RunUpdateOps
from .group import Callbacks, CallbackToHook
from .inference import ClassificationError, Inferencer, ScalarStats
from .inference_runner import InferenceRunner
from .misc import EstimatedTimeLeft
from .monitor import (
    JSONWriter,
    MonitorBase,
    Monitors,
    NoOpMonitor,
    ScalarHistory,
    ScalarPrinter,
    TFEventWriter,
)
from .param import (
    GraphVarParam,
    HyperParam,
    HyperParamSetter,
    HyperParamSetterWithFunc,
    ObjAttrParam,
    ScheduledHyperParamSetter,
)
from .preemption import PreemptionSaver
from .prof import ThroughputTracker
from .saver import MaxSaver, MinSaver, ModelSaver
from .steps import MaintainStepCounter, ProgressBar
from .summary import MergeAllSummaries, MovingAverageSummary
from .trigger import EnableCallbackIf, PeriodicCallback, PeriodicTrigger

__all__ = [
    "Callback",
    "CallbackFactory",
    "CallbackToHook",
    "Callbacks",
    "ClassificationError",
    "DistributedInferenceRunner",
    "EnableCallbackIf",
    "EstimatedTimeLeft",
    "GraphVarParam",
    "HyperParam",
    "HyperParamSetter",
    "HyperParamSetterWithFunc",
    "InferenceRunner",
    "Inferencer",
    "JSONWriter",
    "MaintainStepCounter",
    "MaxSaver",
    "MergeAllSummaries",
    "MinSaver",
    "ModelSaver",
    "MonitorBase",
    "Monitors",
    "MovingAverageSummary",
    "NoOpMonitor",
    "ObjAttrParam",
    "PeriodicCallback",
    "PeriodicTrigger",
    "PreemptionSaver",
    "ProgressBar",
    "ProxyCallback",
    "RunOp",
    "RunUpdateOps",
    "ScalarHistory",
    "ScalarPrinter",
    "ScalarStats",
    "ScheduledHyperParamSetter",
    "TFEventWriter",
    "ThroughputTracker",
]
