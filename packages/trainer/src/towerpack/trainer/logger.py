"""The trainer's name for the towerpack logger: :mod:`towerpack.utils.logger`, re-exported.

The logger and the log directory live in ``towerpack.utils.logger`` (the reference's
``tensorpack.utils.logger``); ``from towerpack.trainer import logger`` gives the same functions
and the same state. Module variables that change (``LOG_DIR``) are read through to it.
"""

from __future__ import annotations

from typing import Any

from towerpack.utils import logger as _impl
from towerpack.utils.logger import (  # noqa: F401  (re-exports)
    LOG_FILE,
    LOGGER,
    DirAction,
    _logger,
    addFilter,
    auto_set_dir,
    critical,
    debug,
    error,
    exception,
    get_logger_dir,
    info,
    require_logger_dir,
    set_logger_dir,
    setLevel,
    unset_logger_dir,
    warn,
    warning,
)

__all__ = list(_impl.__all__)


def __getattr__(name: str) -> Any:
    return getattr(_impl, name)
