"""InputSources: where a trainer's input tensors come from."""

from .base import FeedfreeInput, InputSource
from .dataset import TFDatasetInput, dataflow_to_dataset
from .feed import FeedInput
from .placeholder import PlaceholderInput
from .queue import QueueInput
from .remap import remap_input_source
from .staging import StagingInput
from .tensor import DummyConstantInput, TensorInput
from .zmq_input import ZMQInput

__all__ = [
    "DummyConstantInput",
    "FeedInput",
    "FeedfreeInput",
    "InputSource",
    "PlaceholderInput",
    "QueueInput",
    "StagingInput",
    "TFDatasetInput",
    "TensorInput",
    "ZMQInput",
    "dataflow_to_dataset",
    "remap_input_source",
]
