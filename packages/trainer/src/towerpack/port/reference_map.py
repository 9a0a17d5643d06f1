"""Where every module and public name of the reference (tensorpack 0.11) lives in towerpack, as data.

This is the one map: ``towerpack port`` rewrites imports by it and docs/migrating.md's import tables
are rendered from it. One entry per reference module:

- ``home``: the towerpack module that holds the module's names (None: the module has no home here,
  ``why`` says what to use instead). A package maps to a package, so ``from tensorpack.dataflow
  import BatchData`` becomes ``from towerpack.dataflow import BatchData``.
- ``names``: the reference module's ``__all__``; a package re-exports them. ``extra``: public names
  outside ``__all__`` that scripts import from the module itself.
- ``moved``: names of the module that live in another towerpack module; ``gone``: names with no
  home here, each with what to do instead.
- ``gives``: the modules whose ``__all__`` a package re-exports (what ``from package import *``
  gave besides its own names); ``also``: further towerpack homes of those names (only the top level
  ``tensorpack`` spreads over three towerpack packages).
- ``older``: names ``from module import *`` gave in tensorpack 0.8-0.10 that 0.11 removed, each with
  what to write instead. The module's home keeps them (each warns with that advice when used) and
  its star import gives them, except submodules, imported by their path, and ``tf``/``np``, which a
  star import never rebinds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Ref:
    """Where one reference module's names live in towerpack."""

    home: str | None
    names: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    moved: Mapping[str, str] = field(default_factory=dict)
    gone: Mapping[str, str] = field(default_factory=dict)
    gives: tuple[str, ...] = ()
    also: tuple[str, ...] = ()
    why: str = ""
    older: Mapping[str, str] = field(default_factory=dict)


_CALLBACKS = "towerpack.trainer.callbacks"
_DATAFLOW = "towerpack.dataflow"
_IMGAUG = "towerpack.dataflow.imgaug"
_DATASET = "towerpack.dataflow.dataset"
_INPUTS = "towerpack.trainer.input_source"
_MODELS = "towerpack.trainer.models"
_PREDICT = "towerpack.trainer.predict"
_TRAINER = "towerpack.trainer"
_GRAPH_BUILDER = "towerpack.trainer.graph_builder"
_VERSION = "read versions with importlib.metadata.version('towerpack-trainer')"
_TF_SERVER_BUILDERS = (
    "the TF-server trainers build their graphs themselves: subclass DistributedTrainerReplicated or "
    "DistributedTrainerParameterServer (towerpack.trainer)"
)

REFERENCE: Mapping[str, Ref] = {
    # The top level: `from tensorpack import *` gave utils, dataflow and every TensorFlow part.
    "tensorpack": Ref(
        _TRAINER,
        names=("tfv1",),
        extra=("__version__",),
        moved={"tfv1": "towerpack.trainer.compat"},
        gone={"__version__": _VERSION},
        gives=(
            "tensorpack.utils",
            "tensorpack.dataflow",
            "tensorpack.models",
            "tensorpack.callbacks",
            "tensorpack.tfutils",
            "tensorpack.train",
            "tensorpack.input_source",
            "tensorpack.predict",
        ),
        also=("towerpack.dataflow", "towerpack.utils"),
    ),
    "tensorpack.libinfo": Ref(None, why=_VERSION),
    # Trainers and their configuration.
    "tensorpack.train": Ref(
        _TRAINER,
        gives=(
            "tensorpack.train.base",
            "tensorpack.train.config",
            "tensorpack.train.interface",
            "tensorpack.train.model_desc",
            "tensorpack.train.tower",
            "tensorpack.train.trainers",
        ),
    ),
    "tensorpack.train.base": Ref(_TRAINER, names=("StopTraining", "Trainer")),
    "tensorpack.train.config": Ref(
        _TRAINER, names=("TrainConfig", "AutoResumeTrainConfig", "DEFAULT_CALLBACKS", "DEFAULT_MONITORS")
    ),
    "tensorpack.train.interface": Ref(_TRAINER, names=("launch_train_with_config",)),
    "tensorpack.train.model_desc": Ref(_TRAINER, names=("ModelDesc", "ModelDescBase")),
    "tensorpack.train.tower": Ref(_TRAINER, names=("SingleCostTrainer", "TowerTrainer")),
    "tensorpack.train.trainers": Ref(
        _TRAINER,
        names=(
            "NoOpTrainer",
            "SimpleTrainer",
            "QueueInputTrainer",
            "SyncMultiGPUTrainer",
            "SyncMultiGPUTrainerReplicated",
            "SyncMultiGPUTrainerParameterServer",
            "AsyncMultiGPUTrainer",
            "DistributedTrainerParameterServer",
            "DistributedTrainerReplicated",
            "HorovodTrainer",
            "BytePSTrainer",
        ),
        gone={
            "BytePSTrainer": "BytePS is not supported: use HorovodTrainer, or CollectiveAllReduceTrainer "
            "(launch --backend tf-collective)",
        },
    ),
    "tensorpack.train.utility": Ref(
        _TRAINER,
        extra=("LeastLoadedDeviceSetter", "override_to_local_variable", "OverrideToLocalVariable"),
        moved={"LeastLoadedDeviceSetter": _GRAPH_BUILDER, "override_to_local_variable": _GRAPH_BUILDER},
        gone={
            "OverrideToLocalVariable": "use the context manager "
            "towerpack.trainer.graph_builder.override_to_local_variable()",
        },
    ),
    "tensorpack.graph_builder": Ref(
        _GRAPH_BUILDER, gives=("tensorpack.graph_builder.training", "tensorpack.graph_builder.utils")
    ),
    "tensorpack.graph_builder.training": Ref(
        _GRAPH_BUILDER,
        names=("DataParallelBuilder",),
        extra=("SyncMultiGPUParameterServerBuilder", "SyncMultiGPUReplicatedBuilder", "AsyncMultiGPUBuilder"),
    ),
    "tensorpack.graph_builder.utils": Ref(
        _GRAPH_BUILDER,
        names=("LeastLoadedDeviceSetter", "allreduce_grads"),
        extra=("override_to_local_variable", "split_grad_list", "merge_grad_list"),
    ),
    "tensorpack.graph_builder.distributed": Ref(
        _GRAPH_BUILDER,
        extra=("DistributedReplicatedBuilder", "DistributedParameterServerBuilder"),
        gone={
            "DistributedReplicatedBuilder": _TF_SERVER_BUILDERS,
            "DistributedParameterServerBuilder": _TF_SERVER_BUILDERS,
        },
    ),
    "tensorpack.graph_builder.model_desc": Ref(
        _TRAINER,
        extra=("ModelDesc", "ModelDescBase"),
        moved={"ModelDesc": _TRAINER, "ModelDescBase": _TRAINER},
    ),
    # Callbacks and monitors.
    "tensorpack.callbacks": Ref(
        _CALLBACKS,
        gives=(
            "tensorpack.callbacks.base",
            "tensorpack.callbacks.concurrency",
            "tensorpack.callbacks.graph",
            "tensorpack.callbacks.group",
            "tensorpack.callbacks.hooks",
            "tensorpack.callbacks.inference",
            "tensorpack.callbacks.inference_runner",
            "tensorpack.callbacks.misc",
            "tensorpack.callbacks.monitor",
            "tensorpack.callbacks.param",
            "tensorpack.callbacks.prof",
            "tensorpack.callbacks.saver",
            "tensorpack.callbacks.steps",
            "tensorpack.callbacks.summary",
            "tensorpack.callbacks.trigger",
        ),
    ),
    "tensorpack.callbacks.base": Ref(_CALLBACKS, names=("Callback", "ProxyCallback", "CallbackFactory")),
    "tensorpack.callbacks.concurrency": Ref(_CALLBACKS, names=("StartProcOrThread",)),
    "tensorpack.callbacks.graph": Ref(
        _CALLBACKS,
        names=(
            "RunOp",
            "RunUpdateOps",
            "ProcessTensors",
            "DumpTensors",
            "DumpTensor",
            "DumpTensorAsImage",
            "DumpParamAsImage",
            "CheckNumerics",
        ),
    ),
    "tensorpack.callbacks.group": Ref(_CALLBACKS, names=("Callbacks",)),
    "tensorpack.callbacks.hooks": Ref(
        _CALLBACKS,
        names=("CallbackToHook", "HookToCallback", "TFLocalCLIDebugHook"),
        gone={"TFLocalCLIDebugHook": "tfdbg's command-line debugger is gone from TensorFlow 2"},
    ),
    "tensorpack.callbacks.inference": Ref(
        _CALLBACKS, names=("ScalarStats", "Inferencer", "ClassificationError", "BinaryClassificationStats")
    ),
    "tensorpack.callbacks.inference_runner": Ref(
        _CALLBACKS, names=("InferenceRunnerBase", "InferenceRunner", "DataParallelInferenceRunner")
    ),
    "tensorpack.callbacks.misc": Ref(_CALLBACKS, names=("SendStat", "InjectShell", "EstimatedTimeLeft")),
    "tensorpack.callbacks.monitor": Ref(
        _CALLBACKS,
        names=(
            "MonitorBase",
            "Monitors",
            "TFEventWriter",
            "JSONWriter",
            "ScalarPrinter",
            "SendMonitorData",
            "CometMLMonitor",
        ),
        gone={
            "CometMLMonitor": "use MLflowMonitor (towerpack.trainer.callbacks; "
            "pip install 'towerpack-trainer[mlflow]')",
        },
    ),
    "tensorpack.callbacks.param": Ref(
        _CALLBACKS,
        names=(
            "HyperParam",
            "GraphVarParam",
            "ObjAttrParam",
            "HyperParamSetter",
            "HumanHyperParamSetter",
            "ScheduledHyperParamSetter",
            "StatMonitorParamSetter",
            "HyperParamSetterWithFunc",
        ),
    ),
    "tensorpack.callbacks.prof": Ref(
        _CALLBACKS,
        names=(
            "GPUUtilizationTracker",
            "GraphProfiler",
            "PeakMemoryTracker",
            "GPUMemoryTracker",
            "HostMemoryTracker",
            "ThroughputTracker",
        ),
    ),
    "tensorpack.callbacks.saver": Ref(_CALLBACKS, names=("ModelSaver", "MinSaver", "MaxSaver")),
    "tensorpack.callbacks.stats": Ref(_CALLBACKS),
    "tensorpack.callbacks.steps": Ref(
        _CALLBACKS, names=("TensorPrinter", "ProgressBar", "SessionRunTimeout")
    ),
    "tensorpack.callbacks.summary": Ref(
        _CALLBACKS, names=("MovingAverageSummary", "MergeAllSummaries", "SimpleMovingAverage")
    ),
    "tensorpack.callbacks.trigger": Ref(
        _CALLBACKS, names=("PeriodicTrigger", "PeriodicCallback", "EnableCallbackIf")
    ),
    # Input sources and predictors.
    "tensorpack.input_source": Ref(
        _INPUTS, gives=("tensorpack.input_source.input_source", "tensorpack.input_source.input_source_base")
    ),
    "tensorpack.input_source.input_source": Ref(
        _INPUTS,
        names=(
            "PlaceholderInput",
            "FeedInput",
            "FeedfreeInput",
            "QueueInput",
            "BatchQueueInput",
            "DummyConstantInput",
            "TensorInput",
            "ZMQInput",
            "TFDatasetInput",
            "StagingInput",
        ),
        gone={"BatchQueueInput": "batch in the DataFlow with BatchData and feed it with QueueInput"},
    ),
    "tensorpack.input_source.input_source_base": Ref(_INPUTS, names=("InputSource", "remap_input_source")),
    "tensorpack.predict": Ref(
        _PREDICT,
        gives=(
            "tensorpack.predict.base",
            "tensorpack.predict.concurrency",
            "tensorpack.predict.config",
            "tensorpack.predict.dataset",
            "tensorpack.predict.feedfree",
            "tensorpack.predict.multigpu",
        ),
    ),
    "tensorpack.predict.base": Ref(
        _PREDICT,
        names=("PredictorBase", "OnlinePredictor", "OfflinePredictor"),
        extra=("AsyncPredictorBase",),
    ),
    "tensorpack.predict.concurrency": Ref(
        _PREDICT,
        names=("MultiThreadAsyncPredictor",),
        extra=("MultiProcessPredictWorker", "MultiProcessQueuePredictWorker"),
    ),
    "tensorpack.predict.config": Ref(_PREDICT, names=("PredictConfig",)),
    "tensorpack.predict.dataset": Ref(
        _PREDICT, names=("DatasetPredictorBase", "SimpleDatasetPredictor", "MultiProcessDatasetPredictor")
    ),
    "tensorpack.predict.feedfree": Ref(_PREDICT, names=("FeedfreePredictor",)),
    "tensorpack.predict.multigpu": Ref(
        _PREDICT, names=("MultiTowerOfflinePredictor", "DataParallelOfflinePredictor")
    ),
    # Layers.
    "tensorpack.models": Ref(
        _MODELS,
        gives=(
            "tensorpack.models.batch_norm",
            "tensorpack.models.common",
            "tensorpack.models.conv2d",
            "tensorpack.models.fc",
            "tensorpack.models.layer_norm",
            "tensorpack.models.linearwrap",
            "tensorpack.models.nonlin",
            "tensorpack.models.pool",
            "tensorpack.models.regularize",
            "tensorpack.models.shapes",
        ),
        older={
            "ImageSample": "tf.gather_nd at the four neighbours of each position, weighted bilinearly",
            "SoftMax": "tf.nn.softmax(x), times a variable of your own for a learned temperature",
        },
    ),
    "tensorpack.models.batch_norm": Ref(_MODELS, names=("BatchNorm", "BatchRenorm")),
    "tensorpack.models.common": Ref(
        _MODELS,
        names=("layer_register", "VariableHolder", "rename_tflayer_get_variable", "disable_layer_logging"),
    ),
    "tensorpack.models.conv2d": Ref(_MODELS, names=("Conv2D", "Deconv2D", "Conv2DTranspose")),
    "tensorpack.models.fc": Ref(_MODELS, names=("FullyConnected",)),
    "tensorpack.models.layer_norm": Ref(_MODELS, names=("LayerNorm", "InstanceNorm")),
    "tensorpack.models.linearwrap": Ref(_MODELS, names=("LinearWrap",)),
    "tensorpack.models.nonlin": Ref(_MODELS, names=("Maxout", "PReLU", "BNReLU")),
    "tensorpack.models.pool": Ref(
        _MODELS,
        names=("MaxPooling", "FixedUnPooling", "AvgPooling", "GlobalAvgPooling"),
        older={"BilinearUpSample": "tf.image.resize(x, [h * factor, w * factor], method='bilinear')"},
    ),
    "tensorpack.models.registry": Ref(_MODELS, names=("layer_register", "disable_layer_logging")),
    "tensorpack.models.regularize": Ref(
        _MODELS,
        names=(
            "regularize_cost",
            "regularize_cost_from_collection",
            "l2_regularizer",
            "l1_regularizer",
            "Dropout",
        ),
    ),
    "tensorpack.models.shapes": Ref(_MODELS, names=("ConcatWith",)),
    "tensorpack.models.utils": Ref(_MODELS, extra=("VariableHolder",)),
    "tensorpack.models.shape_utils": Ref(
        None, why="internal shape helpers of the reference's layers: use tf.shape() or tensor.shape"
    ),
    "tensorpack.models.tflayer": Ref(
        f"{_MODELS}.tflayer", extra=("rename_get_variable", "rename_tflayer_get_variable")
    ),
    # tfutils: one towerpack.trainer module per reference module, all also in towerpack.trainer.
    "tensorpack.tfutils": Ref(
        _TRAINER,
        names=(
            "get_current_tower_context",
            "TowerContext",
            "sessinit",
            "summary",
            "optimizer",
            "sesscreate",
            "gradproc",
            "varreplace",
            "tower",
        ),
        gives=("tensorpack.tfutils.common", "tensorpack.tfutils.sessinit", "tensorpack.tfutils.argscope"),
        older={
            "symbolic_functions": "from towerpack.trainer import symbolic_functions",
            "distributed": "from towerpack.trainer import distributed",
        },
    ),
    "tensorpack.tfutils.argscope": Ref(
        "towerpack.trainer.models.argscope",
        names=("argscope", "get_arg_scope", "enable_argscope_for_module", "enable_argscope_for_function"),
    ),
    "tensorpack.tfutils.collect_env": Ref("towerpack.trainer.collect_env", extra=("collect_env_info",)),
    "tensorpack.tfutils.collection": Ref(
        "towerpack.trainer.collection", names=("backup_collection", "restore_collection", "freeze_collection")
    ),
    "tensorpack.tfutils.common": Ref(
        "towerpack.trainer.common",
        names=(
            "get_default_sess_config",
            "get_global_step_value",
            "get_global_step_var",
            "get_tf_version_tuple",
            "collect_env_info",
        ),
        extra=("get_op_tensor_name", "get_tensors_by_names", "get_op_or_tensor_by_name"),
    ),
    "tensorpack.tfutils.dependency": Ref(
        "towerpack.trainer.dependency", names=("dependency_of_targets", "dependency_of_fetches")
    ),
    "tensorpack.tfutils.distributed": Ref(
        "towerpack.trainer.distributed", extra=("get_distributed_session_creator",)
    ),
    "tensorpack.tfutils.export": Ref(
        "towerpack.trainer.export",
        names=("ModelExporter",),
        extra=("ModelExport",),
        gone={
            "ModelExport": "ModelExporter(PredictConfig(model=..., session_init=SmartInit(checkpoint), "
            "input_names=..., output_names=...)).export_serving(path) (its signature keys are tensor names)",
        },
    ),
    "tensorpack.tfutils.gradproc": Ref(
        "towerpack.trainer.gradproc",
        names=(
            "GradientProcessor",
            "FilterNoneGrad",
            "GlobalNormClip",
            "MapGradient",
            "SummaryGradient",
            "PrintGradient",
            "CheckGradient",
            "ScaleGradient",
        ),
    ),
    "tensorpack.tfutils.model_utils": Ref(
        "towerpack.trainer.model_utils", extra=("describe_trainable_vars", "get_shape_str")
    ),
    "tensorpack.tfutils.optimizer": Ref(
        "towerpack.trainer.optimizer",
        names=(
            "apply_grad_processors",
            "ProxyOptimizer",
            "PostProcessOptimizer",
            "VariableAssignmentOptimizer",
            "AccumGradOptimizer",
        ),
    ),
    "tensorpack.tfutils.scope_utils": Ref(
        "towerpack.trainer.scope_utils",
        names=("auto_reuse_variable_scope", "cached_name_scope", "under_name_scope"),
        extra=("under_variable_scope",),
    ),
    "tensorpack.tfutils.sesscreate": Ref(
        "towerpack.trainer.sesscreate",
        names=("NewSessionCreator", "ReuseSessionCreator", "SessionCreatorAdapter"),
    ),
    "tensorpack.tfutils.sessinit": Ref(
        "towerpack.trainer.sessinit",
        names=(
            "SessionInit",
            "ChainInit",
            "SaverRestore",
            "SaverRestoreRelaxed",
            "DictRestore",
            "JustCurrentSession",
            "get_model_loader",
            "SmartInit",
        ),
        older={"TryResumeTraining": "AutoResumeTrainConfig, or SmartInit(logger.get_logger_dir())"},
    ),
    "tensorpack.tfutils.summary": Ref(
        "towerpack.trainer.summary",
        names=("add_tensor_summary", "add_param_summary", "add_activation_summary", "add_moving_summary"),
    ),
    "tensorpack.tfutils.symbolic_functions": Ref(
        "towerpack.trainer.symbolic_functions",
        names=("print_stat", "rms"),
        extra=("psnr",),
        older={
            "prediction_incorrect": "tf.cast(tf.logical_not(tf.nn.in_top_k(logits, label, topk)), "
            "tf.float32)",
            "accuracy": "tf.reduce_mean(tf.cast(tf.nn.in_top_k(logits, label, topk), tf.float32))",
            "flatten": "tf.reshape(x, [-1])",
            "batch_flatten": "tf.reshape(x, [tf.shape(x)[0], -1])",
            "huber_loss": "tf.losses.huber_loss(labels, predictions, delta=delta, "
            "reduction=tf.losses.Reduction.NONE)",
            "get_scalar_var": "tf.get_variable(name, initializer=float(init_value), trainable=False)",
            "class_balanced_cross_entropy": "a loss of your own (HED's class-balanced cross entropy)",
            "class_balanced_sigmoid_cross_entropy": "tf.nn.weighted_cross_entropy_with_logits(labels, "
            "logits, pos_weight=beta / (1 - beta))",
            "guided_relu": "graph.gradient_override_map({'Relu': <a gradient registered with "
            "tf.RegisterGradient>})",
            "saliency_map": "tf.gradients(tf.reduce_max(output, 1), input)[0]",
            "shapeless_placeholder": "tf.placeholder_with_default(x, shape=...), None where the shape varies",
            # Before 0.8.6 the module had no __all__: its star import gave its own imports too.
            "tf": "import tensorflow.compat.v1 as tf",
            "np": "import numpy as np",
        },
    ),
    "tensorpack.tfutils.tower": Ref(
        "towerpack.trainer.tower",
        names=(
            "get_current_tower_context",
            "BaseTowerContext",
            "TowerContext",
            "TowerFuncWrapper",
            "TowerFunc",
            "TowerTensorHandle",
            "TowerTensorHandles",
        ),
    ),
    "tensorpack.tfutils.varmanip": Ref(
        "towerpack.trainer.varmanip",
        names=(
            "SessionUpdate",
            "dump_session_params",
            "load_chkpt_vars",
            "save_chkpt_vars",
            "load_checkpoint_vars",
            "save_checkpoint_vars",
            "get_checkpoint_path",
            "get_all_checkpoints",
        ),
        older={"dump_chkpt_vars": "load_chkpt_vars(path)"},
    ),
    "tensorpack.tfutils.varreplace": Ref(
        "towerpack.trainer.varreplace", names=("custom_getter_scope", "freeze_variables", "remap_variables")
    ),
    # TensorFlow compatibility and the Keras adapter.
    "tensorpack.compat": Ref("towerpack.trainer.compat", extra=("tf", "tfv1", "is_tfv2")),
    "tensorpack.compat.tensor_spec": Ref(None, why="a backport for old TensorFlow: use tf.TensorSpec"),
    "tensorpack.contrib": Ref(_TRAINER),
    "tensorpack.contrib.keras": Ref(
        "towerpack.trainer.keras",
        names=("KerasPhaseCallback", "setup_keras_trainer", "KerasModel"),
        extra=("KerasModelCaller",),
    ),
    # DataFlow.
    "tensorpack.dataflow": Ref(
        _DATAFLOW,
        names=("imgaug", "dataset"),
        gives=(
            "tensorpack.dataflow.base",
            "tensorpack.dataflow.common",
            "tensorpack.dataflow.format",
            "tensorpack.dataflow.image",
            "tensorpack.dataflow.parallel",
            "tensorpack.dataflow.parallel_map",
            "tensorpack.dataflow.raw",
            "tensorpack.dataflow.remote",
            "tensorpack.dataflow.serialize",
        ),
    ),
    "tensorpack.dataflow.base": Ref(
        _DATAFLOW, names=("DataFlow", "ProxyDataFlow", "RNGDataFlow", "DataFlowTerminated")
    ),
    "tensorpack.dataflow.common": Ref(
        _DATAFLOW,
        names=(
            "TestDataSpeed",
            "PrintData",
            "BatchData",
            "BatchDataByShape",
            "FixedSizeData",
            "MapData",
            "MapDataComponent",
            "RepeatedData",
            "RepeatedDataPoint",
            "RandomChooseData",
            "RandomMixData",
            "JoinData",
            "ConcatData",
            "SelectComponent",
            "LocallyShuffleData",
            "CacheData",
        ),
    ),
    "tensorpack.dataflow.format": Ref(
        _DATAFLOW,
        names=("HDF5Data", "LMDBData", "LMDBDataDecoder", "CaffeLMDB", "SVMLightData"),
        gone={
            "CaffeLMDB": "read with LMDBDataDecoder and your own decoder",
            "SVMLightData": "load the file with sklearn.datasets.load_svmlight_file and wrap the arrays in "
            "DataFromList",
        },
    ),
    "tensorpack.dataflow.image": Ref(
        _DATAFLOW,
        names=("ImageFromFile", "AugmentImageComponent", "AugmentImageCoordinates", "AugmentImageComponents"),
    ),
    "tensorpack.dataflow.parallel": Ref(
        _DATAFLOW,
        names=(
            "PrefetchData",
            "MultiProcessPrefetchData",
            "MultiProcessRunner",
            "MultiProcessRunnerZMQ",
            "MultiThreadRunner",
            "PrefetchDataZMQ",
            "MultiThreadPrefetchData",
        ),
    ),
    "tensorpack.dataflow.parallel_map": Ref(
        _DATAFLOW,
        names=(
            "MultiThreadMapData",
            "MultiProcessMapData",
            "MultiProcessMapDataZMQ",
            "MultiProcessMapAndBatchData",
            "MultiProcessMapAndBatchDataZMQ",
        ),
    ),
    "tensorpack.dataflow.raw": Ref(
        _DATAFLOW,
        names=("FakeData", "DataFromQueue", "DataFromList", "DataFromGenerator", "DataFromIterable"),
    ),
    "tensorpack.dataflow.remote": Ref(_DATAFLOW, names=("send_dataflow_zmq", "RemoteDataZMQ")),
    "tensorpack.dataflow.serialize": Ref(
        _DATAFLOW, names=("LMDBSerializer", "NumpySerializer", "TFRecordSerializer", "HDF5Serializer")
    ),
    "tensorpack.dataflow.imgaug": Ref(
        _IMGAUG,
        gives=(
            "tensorpack.dataflow.imgaug.base",
            "tensorpack.dataflow.imgaug.convert",
            "tensorpack.dataflow.imgaug.crop",
            "tensorpack.dataflow.imgaug.deform",
            "tensorpack.dataflow.imgaug.external",
            "tensorpack.dataflow.imgaug.geometry",
            "tensorpack.dataflow.imgaug.imgproc",
            "tensorpack.dataflow.imgaug.meta",
            "tensorpack.dataflow.imgaug.misc",
            "tensorpack.dataflow.imgaug.noise",
            "tensorpack.dataflow.imgaug.paste",
            "tensorpack.dataflow.imgaug.transform",
        ),
    ),
    "tensorpack.dataflow.imgaug.base": Ref(
        f"{_IMGAUG}.base", names=("Augmentor", "ImageAugmentor", "AugmentorList", "PhotometricAugmentor")
    ),
    "tensorpack.dataflow.imgaug.convert": Ref(
        f"{_IMGAUG}.convert", names=("ColorSpace", "Grayscale", "ToUint8", "ToFloat32")
    ),
    "tensorpack.dataflow.imgaug.crop": Ref(
        f"{_IMGAUG}.crop",
        names=(
            "RandomCrop",
            "CenterCrop",
            "RandomCropRandomShape",
            "GoogleNetRandomCropAndResize",
            "RandomCutout",
        ),
    ),
    "tensorpack.dataflow.imgaug.deform": Ref(f"{_IMGAUG}.deform", extra=("GaussianDeform",)),
    "tensorpack.dataflow.imgaug.external": Ref(
        f"{_IMGAUG}.external", names=("IAAugmentor", "Albumentations")
    ),
    "tensorpack.dataflow.imgaug.geometry": Ref(
        f"{_IMGAUG}.geometry", names=("Shift", "Rotation", "RotationAndCropValid", "Affine")
    ),
    "tensorpack.dataflow.imgaug.imgproc": Ref(
        f"{_IMGAUG}.imgproc",
        names=(
            "Hue",
            "Brightness",
            "BrightnessScale",
            "Contrast",
            "MeanVarianceNormalize",
            "GaussianBlur",
            "Gamma",
            "Clip",
            "Saturation",
            "Lighting",
            "MinMaxNormalize",
        ),
    ),
    "tensorpack.dataflow.imgaug.meta": Ref(
        f"{_IMGAUG}.meta",
        names=("RandomChooseAug", "MapImage", "Identity", "RandomApplyAug", "RandomOrderAug"),
    ),
    "tensorpack.dataflow.imgaug.misc": Ref(
        f"{_IMGAUG}.misc", names=("Flip", "Resize", "RandomResize", "ResizeShortestEdge", "Transpose")
    ),
    "tensorpack.dataflow.imgaug.noise": Ref(
        f"{_IMGAUG}.noise", names=("JpegNoise", "GaussianNoise", "SaltPepperNoise")
    ),
    "tensorpack.dataflow.imgaug.paste": Ref(
        f"{_IMGAUG}.paste",
        names=("CenterPaste", "BackgroundFiller", "ConstantBackgroundFiller", "RandomPaste"),
    ),
    "tensorpack.dataflow.imgaug.transform": Ref(
        f"{_IMGAUG}.transform",
        names=(
            "Transform",
            "ResizeTransform",
            "CropTransform",
            "FlipTransform",
            "TransformList",
            "TransformFactory",
        ),
        extra=(
            "BaseTransform",
            "WarpAffineTransform",
            "TransposeTransform",
            "NoOpTransform",
            "PhotometricTransform",
            "LazyTransform",
        ),
    ),
    "tensorpack.dataflow.dataset": Ref(
        _DATASET,
        gives=(
            "tensorpack.dataflow.dataset.bsds500",
            "tensorpack.dataflow.dataset.caltech101",
            "tensorpack.dataflow.dataset.cifar",
            "tensorpack.dataflow.dataset.ilsvrc",
            "tensorpack.dataflow.dataset.mnist",
            "tensorpack.dataflow.dataset.places",
            "tensorpack.dataflow.dataset.svhn",
        ),
    ),
    "tensorpack.dataflow.dataset.bsds500": Ref(f"{_DATASET}.bsds500", names=("BSDS500",)),
    "tensorpack.dataflow.dataset.caltech101": Ref(f"{_DATASET}.caltech101", names=("Caltech101Silhouettes",)),
    "tensorpack.dataflow.dataset.cifar": Ref(f"{_DATASET}.cifar", names=("CifarBase", "Cifar10", "Cifar100")),
    "tensorpack.dataflow.dataset.ilsvrc": Ref(
        f"{_DATASET}.ilsvrc", names=("ILSVRCMeta", "ILSVRC12", "ILSVRC12Files", "TinyImageNet")
    ),
    "tensorpack.dataflow.dataset.mnist": Ref(f"{_DATASET}.mnist", names=("Mnist", "FashionMnist")),
    "tensorpack.dataflow.dataset.places": Ref(f"{_DATASET}.places", names=("Places365Standard",)),
    "tensorpack.dataflow.dataset.svhn": Ref(f"{_DATASET}.svhn", names=("SVHNDigit",)),
    # utils: the same module names under towerpack.utils.
    "tensorpack.utils": Ref("towerpack.utils", names=("logger",), gives=("tensorpack.utils.utils",)),
    "tensorpack.utils.argtools": Ref(
        "towerpack.utils.argtools",
        names=(
            "map_arg",
            "memoized",
            "memoized_method",
            "graph_memoized",
            "shape2d",
            "shape4d",
            "memoized_ignoreargs",
            "log_once",
        ),
    ),
    "tensorpack.utils.compatible_serialize": Ref(
        "towerpack.utils.compatible_serialize", extra=("loads", "dumps")
    ),
    "tensorpack.utils.concurrency": Ref(
        "towerpack.utils.concurrency",
        names=(
            "StoppableThread",
            "LoopThread",
            "ShareSessionThread",
            "ensure_proc_terminate",
            "start_proc_mask_signal",
        ),
        extra=("enable_death_signal",),
    ),
    "tensorpack.utils.debug": Ref("towerpack.utils.debug", extra=("enable_call_trace",)),
    "tensorpack.utils.develop": Ref("towerpack.utils.develop"),
    "tensorpack.utils.fs": Ref(
        "towerpack.utils.fs", names=("mkdir_p", "download", "recursive_walk", "get_dataset_path", "normpath")
    ),
    "tensorpack.utils.gpu": Ref("towerpack.utils.gpu", names=("change_gpu", "get_nr_gpu", "get_num_gpu")),
    "tensorpack.utils.loadcaffe": Ref("towerpack.utils.loadcaffe", names=("load_caffe", "get_caffe_pb")),
    "tensorpack.utils.logger": Ref(
        "towerpack.utils.logger",
        names=(
            "set_logger_dir",
            "auto_set_dir",
            "get_logger_dir",
            "info",
            "warning",
            "error",
            "critical",
            "exception",
            "debug",
            "setLevel",
            "addFilter",
            "warn",
        ),
    ),
    "tensorpack.utils.naming": Ref(
        "towerpack.utils.naming", extra=("GLOBAL_STEP_INCR_OP_NAME", "MOVING_SUMMARY_OPS_KEY")
    ),
    "tensorpack.utils.nvml": Ref("towerpack.utils.nvml", names=("NVMLContext",)),
    "tensorpack.utils.palette": Ref("towerpack.utils.palette", names=("PALETTE_RGB",)),
    "tensorpack.utils.serialize": Ref("towerpack.utils.serialize", names=("loads", "dumps")),
    "tensorpack.utils.stats": Ref(
        "towerpack.utils.stats",
        names=("StatCounter", "BinaryStatistics", "RatioCounter", "Accuracy", "OnlineMoments"),
    ),
    "tensorpack.utils.timer": Ref(
        "towerpack.utils.timer", names=("timed_operation", "IterSpeedCounter", "Timer")
    ),
    "tensorpack.utils.utils": Ref(
        "towerpack.utils.utils",
        names=(
            "change_env",
            "get_rng",
            "fix_rng_seed",
            "get_tqdm",
            "execute_only_once",
            "humanize_time_delta",
        ),
    ),
    "tensorpack.utils.viz": Ref(
        "towerpack.utils.viz",
        names=(
            "interactive_imshow",
            "stack_patches",
            "gen_stack_patches",
            "dump_dataflow_images",
            "intensity_to_rgb",
            "draw_boxes",
        ),
    ),
}
