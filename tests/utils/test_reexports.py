"""Each reference name has one implementation: the other homes of a towerpack.utils name re-export it."""

from __future__ import annotations

import pytest

import towerpack.dataflow.dataset as dataset
import towerpack.dataflow.pipeline.progress as dataflow_progress
import towerpack.utils.progress as utils_progress
from towerpack.dataflow.imgaug import base as imgaug_base
from towerpack.utils import fs, logger, naming


def test_the_trainer_logger_is_the_utils_logger(tmp_path):
    from towerpack.trainer import logger as trainer_logger

    for name in ("set_logger_dir", "auto_set_dir", "get_logger_dir", "info", "warn", "exception", "LOGGER"):
        assert getattr(trainer_logger, name) is getattr(logger, name), name
    assert trainer_logger.DirAction is logger.DirAction and trainer_logger._logger is logger.LOGGER
    try:
        trainer_logger.set_logger_dir(tmp_path / "run")
        assert trainer_logger.LOG_DIR == logger.LOG_DIR == str(tmp_path / "run")  # one state, read through
    finally:
        trainer_logger.unset_logger_dir()
    assert trainer_logger.LOG_DIR is None


def test_dataflow_homes_re_export_utils():
    for name in dataflow_progress.__all__:
        assert getattr(dataflow_progress, name) is getattr(utils_progress, name), name
    assert dataset.get_dataset_path is fs.get_dataset_path
    assert imgaug_base.shape2d((2, 3)) == (2, 3) and imgaug_base.shape2d(4) == (4, 4)
    with pytest.raises(ValueError, match="RandomCrop crop_shape must be an int or a pair of ints"):
        imgaug_base.shape2d("x", "RandomCrop crop_shape")


def test_the_trainer_names_its_graph_elements_with_naming():
    from towerpack.trainer import summary, tower

    assert tower.MOVING_SUMMARY_OPS == summary.MOVING_SUMMARY_OPS == naming.MOVING_SUMMARY_OPS_KEY
