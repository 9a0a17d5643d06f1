"""Fixtures for trainer tests (shared with the exact-resume tests)."""

from support.trainer_fixtures import _no_logger_dir_leak, graph, logdir

__all__ = ["_no_logger_dir_leak", "graph", "logdir"]
