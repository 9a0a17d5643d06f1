"""towerpack.dataflow: Python data pipelines with ZMQ multi-process prefetch. Never imports TensorFlow."""

from .base import DataFlow, DataFlowReentrantGuard, DataFlowTerminated, ProxyDataFlow, RNGDataFlow
from .batch import BatchData
from .common import ConcatData, FixedSizeData, JoinData, LocallyShuffleData, RepeatedData
from .mapping import MapData, MapDataComponent
from .shard import ShardData
from .sources import DataFromGenerator, DataFromList, FakeData
from .wire import WireFormatError, decode, encode, recv_datapoint, send_datapoint

__all__ = [
    "BatchData",
    "ConcatData",
    "DataFlow",
    "DataFlowReentrantGuard",
    "DataFlowTerminated",
    "DataFromGenerator",
    "DataFromList",
    "FakeData",
    "FixedSizeData",
    "JoinData",
    "LocallyShuffleData",
    "MapData",
    "MapDataComponent",
    "ProxyDataFlow",
    "RNGDataFlow",
    "RepeatedData",
    "ShardData",
    "WireFormatError",
    "decode",
    "encode",
    "recv_datapoint",
    "send_datapoint",
]
