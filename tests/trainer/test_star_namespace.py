"""`from tensorpack import *` becomes three star imports: towerpack.trainer, towerpack.dataflow and
towerpack.utils. Every one of the reference's 218 names is reachable from them, or is listed below
with the reason it has no home; `from tensorpack.tfutils import *` maps into towerpack.trainer."""

from __future__ import annotations

import importlib

import pytest

STAR_MODULES = ("towerpack.trainer", "towerpack.dataflow", "towerpack.utils")

# `from tensorpack import *` with TensorFlow present, by the reference subpackage that gave each name.
REFERENCE_STAR = {
    "utils": "change_env get_rng fix_rng_seed get_tqdm execute_only_once humanize_time_delta logger",
    "dataflow": """
        DataFlow ProxyDataFlow RNGDataFlow DataFlowTerminated TestDataSpeed PrintData BatchData
        BatchDataByShape FixedSizeData MapData MapDataComponent RepeatedData RepeatedDataPoint
        RandomChooseData RandomMixData JoinData ConcatData SelectComponent LocallyShuffleData CacheData
        HDF5Data LMDBData LMDBDataDecoder CaffeLMDB SVMLightData ImageFromFile AugmentImageComponent
        AugmentImageCoordinates AugmentImageComponents PrefetchData MultiProcessPrefetchData
        MultiProcessRunner MultiProcessRunnerZMQ MultiThreadRunner PrefetchDataZMQ MultiThreadPrefetchData
        MultiThreadMapData MultiProcessMapData MultiProcessMapDataZMQ MultiProcessMapAndBatchData
        MultiProcessMapAndBatchDataZMQ FakeData DataFromQueue DataFromList DataFromGenerator
        DataFromIterable send_dataflow_zmq RemoteDataZMQ LMDBSerializer NumpySerializer
        TFRecordSerializer HDF5Serializer imgaug dataset""",
    "models": """
        BatchNorm BatchRenorm layer_register VariableHolder rename_tflayer_get_variable
        disable_layer_logging Conv2D Deconv2D Conv2DTranspose FullyConnected LayerNorm InstanceNorm
        LinearWrap Maxout PReLU BNReLU MaxPooling FixedUnPooling AvgPooling GlobalAvgPooling
        regularize_cost regularize_cost_from_collection l2_regularizer l1_regularizer Dropout ConcatWith""",
    "callbacks": """
        Callback ProxyCallback CallbackFactory StartProcOrThread RunOp RunUpdateOps ProcessTensors
        DumpTensors DumpTensor DumpTensorAsImage DumpParamAsImage CheckNumerics Callbacks CallbackToHook
        HookToCallback TFLocalCLIDebugHook ScalarStats Inferencer ClassificationError
        BinaryClassificationStats InferenceRunnerBase InferenceRunner DataParallelInferenceRunner SendStat
        InjectShell EstimatedTimeLeft MonitorBase Monitors TFEventWriter JSONWriter ScalarPrinter
        SendMonitorData CometMLMonitor HyperParam GraphVarParam ObjAttrParam HyperParamSetter
        HumanHyperParamSetter ScheduledHyperParamSetter StatMonitorParamSetter HyperParamSetterWithFunc
        GPUUtilizationTracker GraphProfiler PeakMemoryTracker GPUMemoryTracker HostMemoryTracker
        ThroughputTracker ModelSaver MinSaver MaxSaver TensorPrinter ProgressBar SessionRunTimeout
        MovingAverageSummary MergeAllSummaries SimpleMovingAverage PeriodicTrigger PeriodicCallback
        EnableCallbackIf""",
    "tfutils": """
        get_current_tower_context TowerContext get_default_sess_config get_global_step_value
        get_global_step_var get_tf_version_tuple collect_env_info SessionInit ChainInit SaverRestore
        SaverRestoreRelaxed DictRestore JustCurrentSession get_model_loader SmartInit argscope
        get_arg_scope enable_argscope_for_module enable_argscope_for_function sessinit summary optimizer
        sesscreate gradproc varreplace tower""",
    "train": """
        StopTraining Trainer TrainConfig AutoResumeTrainConfig DEFAULT_CALLBACKS DEFAULT_MONITORS
        launch_train_with_config ModelDesc ModelDescBase SingleCostTrainer TowerTrainer NoOpTrainer
        SimpleTrainer QueueInputTrainer SyncMultiGPUTrainer SyncMultiGPUTrainerReplicated
        SyncMultiGPUTrainerParameterServer AsyncMultiGPUTrainer DistributedTrainerParameterServer
        DistributedTrainerReplicated HorovodTrainer BytePSTrainer""",
    "input_source": """
        PlaceholderInput FeedInput FeedfreeInput QueueInput BatchQueueInput DummyConstantInput TensorInput
        ZMQInput TFDatasetInput StagingInput InputSource remap_input_source""",
    "predict": """
        PredictorBase OnlinePredictor OfflinePredictor MultiThreadAsyncPredictor PredictConfig
        DatasetPredictorBase SimpleDatasetPredictor MultiProcessDatasetPredictor FeedfreePredictor
        MultiTowerOfflinePredictor DataParallelOfflinePredictor""",
    "compat": "tfv1",
}

# Names with no home in towerpack, and why (docs/migrating.md says what to use instead).
NO_HOME = {
    # BytePS is not supported: HorovodTrainer or CollectiveAllReduceTrainer do the same job.
    "BytePSTrainer",
    # Readers of two legacy formats (Caffe's LMDB datum protobufs, SVMlight text).
    "CaffeLMDB",
    "SVMLightData",
    # Batching belongs in the DataFlow (BatchData) in front of a QueueInput.
    "BatchQueueInput",
    # Needs the comet_ml client of a hosted service; MLflowMonitor takes its place.
    "CometMLMonitor",
    # tfdbg v1's interactive terminal debugger: TensorFlow 2 keeps it only in its private
    # tensorflow.python.debug, untested and without a public API.
    "TFLocalCLIDebugHook",
}


def _star(module: str) -> dict:
    namespace: dict = {}
    exec(f"from {module} import *", namespace)
    namespace.pop("__builtins__")
    return namespace


@pytest.fixture(scope="module")
def stars() -> dict[str, dict]:
    return {m: _star(m) for m in STAR_MODULES}


def _reference_names(*parts: str) -> list[str]:
    return [n for part in parts or REFERENCE_STAR for n in REFERENCE_STAR[part].split()]


def test_the_reference_star_has_218_names():
    names = _reference_names()
    assert len(names) == len(set(names)) == 218
    assert set(names) >= NO_HOME


def test_every_reference_name_is_in_one_of_the_three_star_imports(stars):
    reachable = set().union(*stars.values())
    missing = [n for n in _reference_names() if n not in reachable and n not in NO_HOME]
    assert not missing
    # The list of names without a home is exact: a name that gets one must leave it.
    assert not NO_HOME & reachable


def test_the_three_star_imports_agree_where_they_overlap(stars):
    trainer, dataflow, utils = (stars[m] for m in STAR_MODULES)
    for a, b in ((trainer, dataflow), (trainer, utils), (dataflow, utils)):
        for name in set(a) & set(b):
            if name == "logger":  # towerpack.trainer.logger re-exports towerpack.utils.logger
                assert a[name].set_logger_dir is b[name].set_logger_dir and a[name].info is b[name].info
            else:
                assert a[name] is b[name], name


def test_the_tfutils_star_maps_into_towerpack_trainer(stars):
    trainer = stars["towerpack.trainer"]
    assert not [n for n in _reference_names("tfutils") if n not in trainer]
    for module in ("sessinit", "summary", "optimizer", "sesscreate", "gradproc", "varreplace", "tower"):
        assert trainer[module] is importlib.import_module(f"towerpack.trainer.{module}")
    # As in the reference, `argscope` is the function (from towerpack.trainer.models.argscope).
    assert trainer["argscope"] is importlib.import_module("towerpack.trainer.models.argscope").argscope
    tfv1 = importlib.import_module("towerpack.trainer.compat").tfv1
    assert trainer["tfv1"] is tfv1 and tfv1.Session is importlib.import_module("tensorflow").compat.v1.Session


def test_the_other_tfutils_modules_import_by_path():
    """Not in any star import (as in the reference), imported by their module path."""
    homes = {
        "model_utils": ["describe_trainable_vars", "get_shape_str"],
        "symbolic_functions": ["print_stat", "rms", "psnr"],
        "sesscreate": ["NewSessionCreator", "ReuseSessionCreator", "SessionCreatorAdapter"],
        "distributed": ["get_distributed_session_creator"],
        "collect_env": ["collect_env_info"],
        "common": ["collect_env_info", "gpu_available_in_session"],
        "summary": ["create_scalar_summary", "create_image_summary"],
        "collection": ["get_inverse_graphkeys"],
        "compat": ["tf", "tfv1", "is_tfv2"],
        "models.tflayer": ["rename_tflayer_get_variable"],
    }
    for module, names in homes.items():
        mod = importlib.import_module(f"towerpack.trainer.{module}")
        assert not [n for n in names if not hasattr(mod, n)], module
    # Implemented once: the other homes are the same objects.
    common, collect_env = (
        importlib.import_module(f"towerpack.trainer.{m}") for m in ("common", "collect_env")
    )
    assert common.collect_env_info is collect_env.collect_env_info
