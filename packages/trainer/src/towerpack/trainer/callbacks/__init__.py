"""Callbacks and monitors: everything that runs around the training loop."""

from ..callback import Callback, CallbackFactory, ProxyCallback
from .concurrency import StartProcOrThread
from .data_parallel_inference import DataParallelInferenceRunner
from .distributed_inference import DistributedInferenceRunner
from .gpu_utilization import GPUUtilizationTracker
from .graph import (
    CheckNumerics,
    DumpParamAsImage,
    DumpTensor,
    DumpTensorAsImage,
    DumpTensors,
    ProcessTensors,
    RunOp,
    RunUpdateOps,
)
from .group import Callbacks, CallbackToHook
from .hooks import HookToCallback
from .inference import BinaryClassificationStats, ClassificationError, Inferencer, ScalarStats
from .inference_runner import InferenceRunner, InferenceRunnerBase
from .input_wait import InputWaitTracker
from .misc import EstimatedTimeLeft, InjectShell, SendStat
from .mlflow_monitor import MLflowMonitor
from .monitor import (
    JSONWriter,
    MonitorBase,
    Monitors,
    NoOpMonitor,
    ScalarHistory,
    ScalarPrinter,
    SendMonitorData,
    TFEventWriter,
)
from .param import (
    GraphVarParam,
    HumanHyperParamSetter,
    HyperParam,
    HyperParamSetter,
    HyperParamSetterWithFunc,
    ObjAttrParam,
    ScheduledHyperParamSetter,
    StatMonitorParamSetter,
)
from .preemption import PreemptionSaver
from .prof import GPUMemoryTracker, GraphProfiler, HostMemoryTracker, PeakMemoryTracker, ThroughputTracker
from .saver import MaxSaver, MinSaver, ModelSaver
from .steps import MaintainStepCounter, ProgressBar, SessionRunTimeout, TensorPrinter
from .summary import MergeAllSummaries, MovingAverageSummary, SimpleMovingAverage
from .trigger import EnableCallbackIf, PeriodicCallback, PeriodicTrigger

__all__ = [
    "BinaryClassificationStats",
    "Callback",
    "CallbackFactory",
    "CallbackToHook",
    "Callbacks",
    "CheckNumerics",
    "ClassificationError",
    "DataParallelInferenceRunner",
    "DistributedInferenceRunner",
    "DumpParamAsImage",
    "DumpTensor",
    "DumpTensorAsImage",
    "DumpTensors",
    "EnableCallbackIf",
    "EstimatedTimeLeft",
    "GPUMemoryTracker",
    "GPUUtilizationTracker",
    "GraphProfiler",
    "GraphVarParam",
    "HookToCallback",
    "HostMemoryTracker",
    "HumanHyperParamSetter",
    "HyperParam",
    "HyperParamSetter",
    "HyperParamSetterWithFunc",
    "InferenceRunner",
    "InferenceRunnerBase",
    "Inferencer",
    "InjectShell",
    "InputWaitTracker",
    "JSONWriter",
    "MLflowMonitor",
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
    "PeakMemoryTracker",
    "PeriodicCallback",
    "PeriodicTrigger",
    "PreemptionSaver",
    "ProcessTensors",
    "ProgressBar",
    "ProxyCallback",
    "RunOp",
    "RunUpdateOps",
    "ScalarHistory",
    "ScalarPrinter",
    "ScalarStats",
    "ScheduledHyperParamSetter",
    "SendMonitorData",
    "SendStat",
    "SessionRunTimeout",
    "SimpleMovingAverage",
    "StartProcOrThread",
    "StatMonitorParamSetter",
    "TFEventWriter",
    "TensorPrinter",
    "ThroughputTracker",
]
