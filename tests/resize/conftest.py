"""Fixtures for the resize-in-place tests, which run trainers in this process."""

from support.trainer_fixtures import _no_logger_dir_leak, graph, logdir

__all__ = ["_no_logger_dir_leak", "graph", "logdir"]
