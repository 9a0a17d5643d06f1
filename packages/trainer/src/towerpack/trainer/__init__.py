"""towerpack.trainer: the per-process TensorFlow graph-mode training loop.

``from towerpack.trainer import *`` gives the trainers, configs, callbacks, monitors, input
sources, towers, predictors, session initializers and layers, ``tfv1``, and the reference's
tfutils: gradient processing, optimizer wrappers, graph utilities, variable files and export.
With ``from towerpack.dataflow import *`` and ``from towerpack.utils import *`` it gives what
``from tensorpack import *`` gave.
"""

from . import gradproc, logger, optimizer, sesscreate, sessinit, summary, tower, varreplace
from .base import DataFlowInput, NewSessionCreator, StopTraining, Trainer, default_session_config
from .batch_policy import BatchPolicy, BatchSetup, batch_for_world_size
from .callbacks import *  # noqa: F403
from .callbacks import __all__ as _callbacks_all
from .collection import backup_collection, freeze_collection, restore_collection
from .collective_trainer import CollectiveAllReduceTrainer
from .common import (
    collect_env_info,
    get_default_sess_config,
    get_global_step_value,
    get_global_step_var,
    get_op_or_tensor_by_name,
    get_op_tensor_name,
    get_tensors_by_names,
    get_tf_version_tuple,
)
from .compat import tfv1
from .config import DEFAULT_CALLBACKS, DEFAULT_MONITORS, AutoResumeTrainConfig, TrainConfig
from .default_trainer import default_trainer
from .dependency import dependency_of_fetches, dependency_of_targets
from .export import ModelExporter
from .gradproc import *  # noqa: F403
from .horovod_trainer import HorovodTrainer
from .input_source import *  # noqa: F403
from .input_source import __all__ as _inputs_all
from .interface import apply_default_prefetch, launch_train_with_config
from .model_desc import InputDesc, ModelDesc, ModelDescBase
from .models import *  # noqa: F403
from .models import __all__ as _models_all
from .multigpu import (
    AsyncMultiGPUTrainer,
    MultiGPUTrainerBase,
    SyncMultiGPUTrainer,
    SyncMultiGPUTrainerParameterServer,
    SyncMultiGPUTrainerReplicated,
)
from .optimizer import *  # noqa: F403
from .predict import *  # noqa: F403
from .predict import __all__ as _predict_all
from .resume_state import ResumeRecord, TrainerPosition
from .scope_utils import auto_reuse_variable_scope, cached_name_scope, under_name_scope, under_variable_scope
from .sesscreate import ReuseSessionCreator, SessionCreatorAdapter
from .sessinit import *  # noqa: F403
from .sessinit import __all__ as _sessinit_all
from .summary import add_activation_summary, add_moving_summary, add_param_summary, add_tensor_summary
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
from .varmanip import (
    SessionUpdate,
    dump_session_params,
    get_all_checkpoints,
    get_checkpoint_path,
    load_checkpoint_vars,
    load_chkpt_vars,
    save_checkpoint_vars,
    save_chkpt_vars,
)
from .varreplace import custom_getter_scope, freeze_variables, remap_variables

__all__ = [
    "BatchPolicy",
    "BatchSetup",
    "ResumeRecord",
    "TrainerPosition",
    "batch_for_world_size",
    "DEFAULT_CALLBACKS",
    "DEFAULT_MONITORS",
    "AsyncMultiGPUTrainer",
    "AutoResumeTrainConfig",
    "CollectiveAllReduceTrainer",
    "default_trainer",
    "DataFlowInput",
    "DistributedReplicatedTrainer",
    "DistributedTrainerParameterServer",
    "DistributedTrainerReplicated",
    "FeedfreeTrainerBase",
    "HorovodTrainer",
    "InputDesc",
    "ModelDesc",
    "ModelDescBase",
    "MultiGPUTrainerBase",
    "NewSessionCreator",
    "NoOpTrainer",
    "PredictTowerContext",
    "QueueInputTrainer",
    "ReuseSessionCreator",
    "SessionCreatorAdapter",
    "SimpleFeedfreeTrainer",
    "SimpleTrainer",
    "SingleCostFeedfreeTrainer",
    "SingleCostTrainer",
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
    "tfv1",
    *_callbacks_all,
    *_inputs_all,
    *_predict_all,
    *_sessinit_all,
    *_models_all,
]

# The reference's tfutils (gradient processing, optimizer wrappers, graph utilities, variables and
# checkpoints, export), all importable from here; the module names are those `from tensorpack
# import *` gave. Its other tfutils modules are here by the same names (model_utils,
# symbolic_functions, distributed, collect_env, ...), imported by path as in the reference.
__all__ += [
    "gradproc",
    "optimizer",
    "sesscreate",
    "sessinit",
    "summary",
    "tower",
    "varreplace",
    "backup_collection",
    "freeze_collection",
    "restore_collection",
    "collect_env_info",
    "get_default_sess_config",
    "get_global_step_value",
    "get_global_step_var",
    "get_op_or_tensor_by_name",
    "get_op_tensor_name",
    "get_tensors_by_names",
    "get_tf_version_tuple",
    "dependency_of_fetches",
    "dependency_of_targets",
    "ModelExporter",
    *gradproc.__all__,
    *optimizer.__all__,
    "auto_reuse_variable_scope",
    "cached_name_scope",
    "under_name_scope",
    "under_variable_scope",
    "add_activation_summary",
    "add_param_summary",
    "SessionUpdate",
    "dump_session_params",
    "get_all_checkpoints",
    "get_checkpoint_path",
    "load_checkpoint_vars",
    "load_chkpt_vars",
    "save_checkpoint_vars",
    "save_chkpt_vars",
    "custom_getter_scope",
    "freeze_variables",
    "remap_variables",
]
