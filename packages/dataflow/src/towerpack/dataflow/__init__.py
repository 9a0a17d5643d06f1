"""towerpack.dataflow: Python data pipelines with ZMQ multi-process prefetch. Never imports TensorFlow."""

from .base import (
    DataFlow,
    DataFlowReentrantGuard,
    DataFlowTerminated,
    LengthUnknownError,
    ProxyDataFlow,
    RNGDataFlow,
)
from .batch import BatchData
from .common import ConcatData, FixedSizeData, JoinData, LocallyShuffleData, RepeatedData
from .mapping import MapData, MapDataComponent
from .parallel import MultiProcessRunnerZMQ, PrefetchDataZMQ
from .parallel_map import MultiProcessMapDataZMQ, MultiThreadMapData
from .remote import RemoteDataZMQ
from .server import DataServer, send_dataflow_zmq
from .shard import ShardData
from .sources import DataFromGenerator, DataFromList, FakeData
from .speed import SpeedReport, TestDataSpeed, benchmark
from .wire import WireFormatError, decode, encode, recv_datapoint, send_datapoint
from .workers import DataFlowWorkerError

__all__ = [
    "BatchData",
    "ConcatData",
    "DataFlow",
    "DataFlowReentrantGuard",
    "DataFlowTerminated",
    "DataFlowWorkerError",
    "DataFromGenerator",
    "DataFromList",
    "DataServer",
    "FakeData",
    "FixedSizeData",
    "JoinData",
    "LengthUnknownError",
    "LocallyShuffleData",
    "MapData",
    "MapDataComponent",
    "MultiProcessMapDataZMQ",
    "MultiProcessRunnerZMQ",
    "MultiThreadMapData",
    "PrefetchDataZMQ",
    "ProxyDataFlow",
    "RNGDataFlow",
    "RemoteDataZMQ",
    "RepeatedData",
    "ShardData",
    "SpeedReport",
    "TestDataSpeed",
    "WireFormatError",
    "benchmark",
    "decode",
    "encode",
    "recv_datapoint",
    "send_dataflow_zmq",
    "send_datapoint",
]
