"""towerpack.trainer: the per-process TensorFlow graph-mode training loop.

``from towerpack.trainer import *`` gives the trainers, configs, callbacks, monitors, input
sources, towers, predictors and session initializers (what ``from tensorpack import *`` gave).
"""

from . import logger
from .base import NewSessionCreator, StopTraining, Trainer, default_session_config
from .callbacks import *  # noqa: F403
from .callbacks import __all__ as _callbacks_all
from .config import DEFAULT_CALLBACKS, DEFAULT_MONITORS, AutoResumeTrainConfig, TrainConfig
from .horovod_trainer import HorovodTrainer
from .input_source import *  # noqa: F403
from .input_source import __all__ as _inputs_all
from .interface import apply_default_prefetch, launch_train_with_config
from .model_desc import ModelDesc, ModelDescBase
from .multigpu import (
    AsyncMultiGPUTrainer,
    MultiGPUTrainerBase,
    SyncMultiGPUTrainer,
    SyncMultiGPUTrainerParameterServer,
    SyncMultiGPUTrainerReplicated,
)
from .predict import OfflinePredictor, OnlinePredictor, PredictConfig
from .sessinit import ChainInit, DictRestore, JustCurrentSession, SaverRestore, SessionInit, SmartInit
from .summary import add_moving_summary, add_tensor_summary
from .tf_server_trainer import (
    DistributedReplicatedTrainer,
    DistributedTrainerParameterServer,
    DistributedTrainerReplicated,
)
from .tower import (
    PredictTowerContext,
    TowerContext,
    TowerFunc,
    TowerFuncWrapper,
    TowerTensorHandle,
    TowerTensorHandles,
    TrainTowerContext,
    get_current_tower_context,
)
from .tower_trainer import SingleCostTrainer, TowerTrainer
from .trainers import (
    FeedfreeTrainerBase,
    NoOpTrainer,
    QueueInputTrainer,
    SimpleFeedfreeTrainer,
    SimpleTrainer,
    SingleCostFeedfreeTrainer,
)

__all__ = [
    "DEFAULT_CALLBACKS",
    "DEFAULT_MONITORS",
    "AsyncMultiGPUTrainer",
    "AutoResumeTrainConfig",
    "ChainInit",
    "DictRestore",
    "DistributedReplicatedTrainer",
    "DistributedTrainerParameterServer",
    "DistributedTrainerReplicated",
    "FeedfreeTrainerBase",
    "HorovodTrainer",
    "JustCurrentSession",
    "ModelDesc",
    "ModelDescBase",
    "MultiGPUTrainerBase",
    "NewSessionCreator",
    "NoOpTrainer",
    "OfflinePredictor",
    "OnlinePredictor",
    "PredictConfig",
    "PredictTowerContext",
    "QueueInputTrainer",
    "SaverRestore",
    "SessionInit",
    "SimpleFeedfreeTrainer",
    "SimpleTrainer",
    "SingleCostFeedfreeTrainer",
    "SingleCostTrainer",
    "SmartInit",
    "StopTraining",
    "SyncMultiGPUTrainer",
    "SyncMultiGPUTrainerParameterServer",
    "SyncMultiGPUTrainerReplicated",
    "TowerContext",
    "TowerFunc",
    "TowerFuncWrapper",
    "TowerTensorHandle",
    "TowerTensorHandles",
    "TowerTrainer",
    "TrainConfig",
    "TrainTowerContext",
    "Trainer",
    "add_moving_summary",
    "add_tensor_summary",
    "apply_default_prefetch",
    "default_session_config",
    "get_current_tower_context",
    "launch_train_with_config",
    "logger",
    *_callbacks_all,
    *_inputs_all,
]
