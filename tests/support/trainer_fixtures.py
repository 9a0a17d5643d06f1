"""Fixtures for tests that run trainers: a fresh default graph and a fresh log directory per test."""

import pytest

from towerpack.trainer import logger
from towerpack.trainer.compat import tf


@pytest.fixture
def graph():
    """A new default graph for the test (trainers build into the default graph)."""
    g = tf.Graph()
    with g.as_default():
        yield g


@pytest.fixture
def logdir(tmp_path):
    """A log directory set with set_logger_dir for the test, unset afterwards."""
    d = tmp_path / "log"
    logger.set_logger_dir(str(d), action="d")
    yield d
    logger.unset_logger_dir()


@pytest.fixture(autouse=True)
def _no_logger_dir_leak():
    yield
    logger.unset_logger_dir()
