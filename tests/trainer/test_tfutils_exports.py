"""The reference's tfutils and predictor names: where they import from, and the migration guide."""

from __future__ import annotations

import importlib
from pathlib import Path

import towerpack.trainer

# What `from tensorpack import *` gave of these areas (tfutils' common and sessinit, its module
# names, and every predictor).
REFERENCE_TOP_LEVEL = [
    "collect_env_info",
    "get_default_sess_config",
    "get_global_step_value",
    "get_global_step_var",
    "get_tf_version_tuple",
    "ChainInit",
    "DictRestore",
    "JustCurrentSession",
    "SaverRestore",
    "SaverRestoreRelaxed",
    "SessionInit",
    "SmartInit",
    "get_model_loader",
    "gradproc",
    "optimizer",
    "sessinit",
    "summary",
    "tower",
    "varreplace",
    "AsyncPredictorBase",
    "DataParallelOfflinePredictor",
    "DatasetPredictorBase",
    "FeedfreePredictor",
    "MultiProcessDatasetPredictor",
    "MultiProcessPredictWorker",
    "MultiProcessQueuePredictWorker",
    "MultiThreadAsyncPredictor",
    "MultiTowerOfflinePredictor",
    "OfflinePredictor",
    "OnlinePredictor",
    "PredictConfig",
    "PredictorBase",
    "SimpleDatasetPredictor",
]

# Only in the reference's tfutils modules: here in towerpack.trainer.<module> and towerpack.trainer.
BY_MODULE = {
    "common": ["get_op_tensor_name", "get_tensors_by_names", "get_op_or_tensor_by_name"],
    "collection": ["backup_collection", "restore_collection", "freeze_collection"],
    "gradproc": [
        "GradientProcessor",
        "FilterNoneGrad",
        "GlobalNormClip",
        "MapGradient",
        "SummaryGradient",
        "PrintGradient",
        "CheckGradient",
        "ScaleGradient",
    ],
    "optimizer": [
        "apply_grad_processors",
        "ProxyOptimizer",
        "PostProcessOptimizer",
        "VariableAssignmentOptimizer",
        "AccumGradOptimizer",
    ],
    "summary": ["add_tensor_summary", "add_param_summary", "add_activation_summary", "add_moving_summary"],
    "scope_utils": [
        "auto_reuse_variable_scope",
        "under_name_scope",
        "under_variable_scope",
        "cached_name_scope",
    ],
    "varreplace": ["custom_getter_scope", "remap_variables", "freeze_variables"],
    "dependency": ["dependency_of_targets", "dependency_of_fetches"],
    "varmanip": [
        "SessionUpdate",
        "dump_session_params",
        "save_chkpt_vars",
        "save_checkpoint_vars",
        "load_chkpt_vars",
        "load_checkpoint_vars",
        "get_checkpoint_path",
        "get_all_checkpoints",
    ],
    "export": ["ModelExporter"],
}


def test_star_import_gives_the_reference_top_level_names():
    namespace: dict = {}
    exec("from towerpack.trainer import *", namespace)
    missing = [n for n in REFERENCE_TOP_LEVEL if n not in namespace]
    assert not missing
    assert namespace["gradproc"] is importlib.import_module("towerpack.trainer.gradproc")
    assert namespace["get_model_loader"] is namespace["SmartInit"]


def test_module_names_import_from_their_module_and_from_the_package():
    for module, names in BY_MODULE.items():
        mod = importlib.import_module(f"towerpack.trainer.{module}")
        for name in names:
            assert getattr(mod, name) is getattr(towerpack.trainer, name), f"{module}.{name}"
            assert name in towerpack.trainer.__all__, name


def test_migration_guide_names_every_one():
    guide = (Path(__file__).resolve().parents[2] / "docs" / "migrating.md").read_text()
    names = REFERENCE_TOP_LEVEL + [n for names in BY_MODULE.values() for n in names]
    assert not [n for n in names if f"`{n}`" not in guide]
    for module in BY_MODULE:
        assert f"towerpack.trainer.{module}" in guide, module
