"""towerpack.trainer.models: the reference's layers, argscope, LinearWrap and regularizers.

Layers take their name first (``Conv2D('conv0', x, 32, 3)``), create the reference's variable
names (``conv0/W``, ``bn/mean/EMA`` ...) so its checkpoints load, honour ``argscope``, and read
training or inference from the TowerContext.
"""

from .argscope import argscope, enable_argscope_for_function, enable_argscope_for_module, get_arg_scope
from .batch_norm import BatchNorm, EMAUpdate
from .batch_norm_sync import SyncMode
from .batch_renorm import BatchRenorm
from .conv2d import Conv2D, Conv2DTranspose, Deconv2D
from .dropout import Dropout
from .fc import FullyConnected
from .layer_norm import InstanceNorm, LayerNorm
from .legacy import BilinearUpSample, ImageSample, SoftMax  # removed by the reference, kept
from .linearwrap import LinearWrap
from .nonlin import BNReLU, LeakyReLU, Maxout, PReLU
from .pool import AvgPooling, FixedUnPooling, GlobalAvgPooling, MaxPooling
from .registry import disable_layer_logging, layer_register
from .regularize import l1_regularizer, l2_regularizer, regularize_cost, regularize_cost_from_collection
from .shapes import ConcatWith
from .tflayer import rename_tflayer_get_variable
from .variable_holder import VariableHolder

__all__ = [
    "AvgPooling",
    "BNReLU",
    "BatchNorm",
    "BatchRenorm",
    "BilinearUpSample",
    "ConcatWith",
    "Conv2D",
    "Conv2DTranspose",
    "Deconv2D",
    "Dropout",
    "EMAUpdate",
    "FixedUnPooling",
    "FullyConnected",
    "GlobalAvgPooling",
    "ImageSample",
    "InstanceNorm",
    "LayerNorm",
    "LeakyReLU",
    "LinearWrap",
    "MaxPooling",
    "Maxout",
    "PReLU",
    "SoftMax",
    "SyncMode",
    "VariableHolder",
    "argscope",
    "disable_layer_logging",
    "enable_argscope_for_function",
    "enable_argscope_for_module",
    "get_arg_scope",
    "l1_regularizer",
    "l2_regularizer",
    "layer_register",
    "regularize_cost",
    "regularize_cost_from_collection",
    "rename_tflayer_get_variable",
]
