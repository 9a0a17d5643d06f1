"""towerpack.dataflow: Python data pipelines with ZMQ multi-process prefetch. Never imports TensorFlow."""

from .base import (
    DataFlow,
    DataFlowReentrantGuard,
    DataFlowTerminated,
    LengthUnknownError,
    ProxyDataFlow,
    RNGDataFlow,
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
from .hdf5_format import HDF5Data
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
from .printing import PrintData
from .reader import DatasetReader
from .remote import RemoteDataZMQ
from .serialize import HDF5Serializer, LMDBSerializer, NumpySerializer, TFRecordSerializer
from .server import DataServer, send_dataflow_zmq
from .shard import ShardData
from .sharding import Remainder, WorkerInfo, get_worker_info
from .sources import DataFromGenerator, DataFromIterable, DataFromList, DataFromQueue, FakeData
from .speed import SpeedReport, TestDataSpeed, benchmark
from .tfrecord import TFRecordData
from .wire import WireFormatError, WireLimits, decode, encode, pack, recv_datapoint, send_datapoint, unpack
from .workers import DataFlowWorkerError

__all__ = [
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
    "DataServer",
    "DatasetReader",
    "EpochEnd",
    "FakeData",
    "FixedSizeData",
    "HDF5Data",
    "HDF5Serializer",
    "JoinData",
    "LMDBData",
    "LMDBDataDecoder",
    "LMDBSerializer",
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
    "decode",
    "encode",
    "get_worker_info",
    "pack",
    "recv_datapoint",
    "repeat_forever",
    "send_dataflow_zmq",
    "send_datapoint",
    "unpack",
]
