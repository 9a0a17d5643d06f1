"""towerpack.dataflow: Python data pipelines with ZMQ multi-process prefetch. Never imports TensorFlow.

The image side (``imgaug``, ``dataset`` and the image components, which need OpenCV) loads on
first use, so that importing the package stays cheap for processes that never touch images.
"""

import importlib
from typing import Any

from .base import (
    DataFlow,
    DataFlowReentrantGuard,
    DataFlowTerminated,
    LengthUnknownError,
    ProxyDataFlow,
    RNGDataFlow,
    dataflow_len,
)
from .batch import BatchData, BatchDataByShape
from .common import (
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
from .file_errors import DatasetFormatError
from .hdf5_format import HDF5Data
from .ledger import Ledger
from .lmdb_format import LMDBData, LMDBDataDecoder
from .mapping import MapData, MapDataComponent, SelectComponent
from .mixing import RandomChooseData, RandomMixData
from .parallel import (
    MultiProcessPrefetchData,
    MultiProcessRunner,
    MultiProcessRunnerZMQ,
    MultiThreadPrefetchData,
    MultiThreadRunner,
    PrefetchData,
    PrefetchDataZMQ,
)
from .parallel_map import (
    MultiProcessMapAndBatchData,
    MultiProcessMapAndBatchDataZMQ,
    MultiProcessMapData,
    MultiProcessMapDataZMQ,
    MultiThreadMapData,
    ThreadedMapData,
)
from .placement import Launcher, Placement, PlacementError, Role, placement
from .position import DataPosition, PositionUnsupportedError
from .position_tracker import PositionMode, PositionTracker
from .printing import PrintData
from .reader import DatasetReader
from .remote import RemoteDataZMQ
from .seeding import fix_rng_seed, set_seed
from .serialize import HDF5Serializer, LMDBSerializer, NumpySerializer, TFRecordSerializer
from .server import DataServer, send_dataflow_zmq
from .shard import ShardData
from .sharding import Remainder, WorkerInfo, get_worker_info
from .sources import DataFromGenerator, DataFromIterable, DataFromList, DataFromQueue, FakeData
from .speed import SpeedReport, TestDataSpeed, benchmark
from .tfrecord import TFRecordData
from .wire import WireFormatError, WireLimits, decode, encode, pack, recv_datapoint, send_datapoint, unpack
from .workers import DataFlowWorkerError

#: Loaded on first use: attribute -> module (a submodule itself, or the module that defines it).
_LAZY = {
    "imgaug": ".imgaug",
    "dataset": ".dataset",
    "AugmentImageComponent": ".image",
    "AugmentImageComponents": ".image",
    "AugmentImageCoordinates": ".image",
    "ImageFromFile": ".image",
    "IndexedList": ".indexed_list",  # an IndexedDataset: loads the dataset package
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
