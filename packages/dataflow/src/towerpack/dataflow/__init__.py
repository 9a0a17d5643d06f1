"""towerpack.dataflow: Python data pipelines with ZMQ multi-process prefetch. Never imports TensorFlow.

The image side (``imgaug``, ``dataset`` and the image components, which need OpenCV) loads on
first use, so that importing the package stays cheap for processes that never touch images.
"""

import importlib
from typing import Any

from towerpack.utils.placement import Launcher, Placement, PlacementError, Role, placement

from .formats.errors import DatasetFormatError
from .formats.hdf5 import HDF5Data
from .formats.lmdb import LMDBData, LMDBDataDecoder
from .formats.reader import DatasetReader
from .formats.serializers import HDF5Serializer, LMDBSerializer, NumpySerializer, TFRecordSerializer
from .formats.tfrecord import TFRecordData
from .parallel.maps import (
    MultiProcessMapAndBatchData,
    MultiProcessMapAndBatchDataZMQ,
    MultiProcessMapData,
    MultiProcessMapDataZMQ,
    MultiThreadMapData,
    ThreadedMapData,
)
from .parallel.runners import (
    MultiProcessPrefetchData,
    MultiProcessRunner,
    MultiProcessRunnerZMQ,
    MultiThreadPrefetchData,
    MultiThreadRunner,
    PrefetchData,
    PrefetchDataZMQ,
)
from .parallel.workers import DataFlowWorkerError
from .pipeline.base import (
    DataFlow,
    DataFlowReentrantGuard,
    DataFlowTerminated,
    LengthUnknownError,
    ProxyDataFlow,
    RNGDataFlow,
    dataflow_len,
)
from .pipeline.batch import BatchData, BatchDataByShape
from .pipeline.mapping import MapData, MapDataComponent, SelectComponent
from .pipeline.mixing import RandomChooseData, RandomMixData
from .pipeline.printing import PrintData
from .pipeline.seeding import fix_rng_seed, set_seed
from .pipeline.shard import ShardData
from .pipeline.sharding import Remainder, WorkerInfo, get_worker_info
from .pipeline.sources import DataFromGenerator, DataFromIterable, DataFromList, DataFromQueue, FakeData
from .pipeline.speed import SpeedReport, TestDataSpeed, benchmark
from .pipeline.stream import (
    CacheData,
    ConcatData,
    EpochEnd,
    FixedSizeData,
    JoinData,
    LocallyShuffleData,
    RepeatedData,
    RepeatedDataPoint,
    repeat_forever,
)
from .resume.ledger import Ledger
from .resume.position import DataPosition, PositionUnsupportedError
from .resume.tracker import PositionMode, PositionTracker
from .serve.remote import RemoteDataZMQ
from .serve.server import DataServer, send_dataflow_zmq
from .wire.codec import (
    WireFormatError,
    WireLimits,
    decode,
    encode,
    pack,
    recv_datapoint,
    send_datapoint,
    unpack,
)

#: Loaded on first use: attribute -> module (a submodule itself, or the module that defines it).
_LAZY = {
    "imgaug": ".imgaug",
    "dataset": ".dataset",
    "AugmentImageComponent": ".image.dataflows",
    "AugmentImageComponents": ".image.dataflows",
    "AugmentImageCoordinates": ".image.dataflows",
    "ImageFromFile": ".image.dataflows",
    "IndexedList": ".dataset.indexed_list",  # an IndexedDataset: loads the dataset package
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    loaded = importlib.import_module(module, __name__)
    value = loaded if module == f".{name}" else getattr(loaded, name)
    globals()[name] = value
    return value


__all__ = [
    "AugmentImageComponent",
    "AugmentImageComponents",
    "AugmentImageCoordinates",
    "BatchData",
    "BatchDataByShape",
    "CacheData",
    "ConcatData",
    "DataFlow",
    "DataFlowReentrantGuard",
    "DataFlowTerminated",
    "DataFlowWorkerError",
    "DataFromGenerator",
    "DataFromIterable",
    "DataFromList",
    "DataFromQueue",
    "DataPosition",
    "DataServer",
    "DatasetFormatError",
    "DatasetReader",
    "EpochEnd",
    "FakeData",
    "FixedSizeData",
    "HDF5Data",
    "HDF5Serializer",
    "ImageFromFile",
    "IndexedList",
    "JoinData",
    "LMDBData",
    "LMDBDataDecoder",
    "LMDBSerializer",
    "Launcher",
    "Ledger",
    "LengthUnknownError",
    "LocallyShuffleData",
    "MapData",
    "MapDataComponent",
    "MultiProcessMapAndBatchData",
    "MultiProcessMapAndBatchDataZMQ",
    "MultiProcessMapData",
    "MultiProcessMapDataZMQ",
    "MultiProcessPrefetchData",
    "MultiProcessRunner",
    "MultiProcessRunnerZMQ",
    "MultiThreadMapData",
    "MultiThreadPrefetchData",
    "MultiThreadRunner",
    "NumpySerializer",
    "Placement",
    "PlacementError",
    "PositionMode",
    "PositionTracker",
    "PositionUnsupportedError",
    "PrefetchData",
    "PrefetchDataZMQ",
    "PrintData",
    "ProxyDataFlow",
    "RNGDataFlow",
    "RandomChooseData",
    "RandomMixData",
    "Remainder",
    "RemoteDataZMQ",
    "RepeatedData",
    "RepeatedDataPoint",
    "Role",
    "SelectComponent",
    "ShardData",
    "SpeedReport",
    "TFRecordData",
    "TFRecordSerializer",
    "TestDataSpeed",
    "ThreadedMapData",
    "WireFormatError",
    "WireLimits",
    "WorkerInfo",
    "benchmark",
    "dataflow_len",
    "dataset",
    "decode",
    "encode",
    "fix_rng_seed",
    "get_worker_info",
    "imgaug",
    "pack",
    "placement",
    "recv_datapoint",
    "repeat_forever",
    "send_dataflow_zmq",
    "send_datapoint",
    "set_seed",
    "unpack",
]
