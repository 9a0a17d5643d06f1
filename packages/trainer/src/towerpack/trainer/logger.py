"""The trainer's logger and its log directory.

``set_logger_dir`` is called by the user (in code, or through ``TrainConfig(logdir=...)``) and
never asks anything on stdin: what happens to an existing, non-empty directory is decided by
the ``action`` argument.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time

from .choice import Choice

__all__ = [
    "LOGGER",
    "DirAction",
    "auto_set_dir",
    "debug",
    "error",
    "exception",
    "get_logger_dir",
    "info",
    "set_logger_dir",
    "warn",
    "warning",
]

LOGGER = logging.getLogger("towerpack.trainer")
# The reference's name for its logging.Logger (its tests pass it to assertLogs).
_logger = LOGGER
_FORMAT = "[%(asctime)s %(filename)s:%(lineno)d] %(levelname)s %(message)s"

if not LOGGER.handlers:
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(logging.Formatter(_FORMAT, datefmt="%m%d %H:%M:%S"))
    LOGGER.addHandler(_handler)
    LOGGER.setLevel(logging.INFO)

debug = LOGGER.debug
info = LOGGER.info
warning = LOGGER.warning
warn = LOGGER.warning
error = LOGGER.error
exception = LOGGER.exception


class DirAction(Choice):
    """What ``set_logger_dir`` does with a directory that exists and is not empty (the reference's
    letters; a word is taken by its first letter)."""

    KEEP = "k"
    BACKUP = "b"
    DELETE = "d"
    NEW = "n"
    QUIT = "q"


_EXPLAINED = {
    DirAction.KEEP: "keep: use the directory as it is (appending, resuming)",
    DirAction.BACKUP: "backup: rename it to <dir>-<time> and start an empty one",
    DirAction.DELETE: "delete: remove it and start an empty one",
    DirAction.NEW: "new: leave it alone and log into <dir>-<time> instead",
    DirAction.QUIT: "quit: refuse (raise FileExistsError)",
}
_LOG_DIR: str | None = None
_FILE_HANDLER: logging.Handler | None = None
LOG_FILE = "log.log"


def _fresh_name(dirname: str) -> str:
    """``<dirname>-<time>``, with a counter if that exists already."""
    base = f"{dirname}-{time.strftime('%m%d-%H%M%S')}"
    name, i = base, 1
    while os.path.exists(name):
        name, i = f"{base}-{i}", i + 1
    return name


def set_logger_dir(dirname: str, action: DirAction | str | None = None) -> str:
    """Use ``dirname`` for logs, checkpoints, event files and stats.json; returns the directory used.

    Args:
        dirname: the directory; created if missing.
        action: what to do if it exists and is not empty: a ``DirAction`` or one of ``k`` (keep),
            ``b`` (backup), ``d`` (delete), ``n`` (new directory with a time suffix) or ``q`` (quit).
            With no action a non-empty directory is an error, so nothing is ever overwritten silently.
    """
    global _LOG_DIR, _FILE_HANDLER
    if isinstance(action, str):
        action = action.lower()[:1]
    if action is not None:
        action = DirAction.parse(action, "logger dir action")
    dirname = os.path.normpath(os.fspath(dirname))
    if os.path.isdir(dirname) and os.listdir(dirname):
        if action is None or action is DirAction.QUIT:
            options = "; ".join(f"{k.value!r} = {v}" for k, v in _EXPLAINED.items())
            raise FileExistsError(
                f"log directory {dirname} exists and is not empty; pass action= to set_logger_dir "
                f"(or TrainConfig(logdir_action=...)): {options}"
            )
        if action is DirAction.BACKUP:
            backup = _fresh_name(dirname)
            shutil.move(dirname, backup)
            info("Existing log directory moved to %s", backup)
        elif action is DirAction.DELETE:
            shutil.rmtree(dirname)
            info("Existing log directory %s deleted", dirname)
        elif action is DirAction.NEW:
            dirname = _fresh_name(dirname)
            info("Using a new log directory %s", dirname)
    elif os.path.exists(dirname) and not os.path.isdir(dirname):
        raise NotADirectoryError(f"log directory {dirname} exists and is not a directory")
    os.makedirs(dirname, exist_ok=True)
    if _FILE_HANDLER is not None:
        LOGGER.removeHandler(_FILE_HANDLER)
        _FILE_HANDLER.close()
    _FILE_HANDLER = logging.FileHandler(os.path.join(dirname, LOG_FILE), encoding="utf-8")
    _FILE_HANDLER.setFormatter(logging.Formatter(_FORMAT, datefmt="%m%d %H:%M:%S"))
    LOGGER.addHandler(_FILE_HANDLER)
    _LOG_DIR = dirname
    info("Log directory: %s", dirname)
    return dirname


def auto_set_dir(action: DirAction | str | None = None, name: str | None = None) -> str:
    """``set_logger_dir('train_log/<script name>[:name]', action)``, named after the running script."""
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    base = os.path.splitext(os.path.basename(script))[0] if script else "interactive"
    dirname = os.path.join("train_log", base + (f":{name}" if name else ""))
    return set_logger_dir(dirname, action=action)


def get_logger_dir() -> str | None:
    """The directory set by ``set_logger_dir``, or None (then nothing is written to disk)."""
    return _LOG_DIR


def require_logger_dir(who: str) -> str:
    """The log directory, or a ValueError saying that ``who`` writes there and none is set."""
    if _LOG_DIR is None or not os.path.isdir(_LOG_DIR):
        raise ValueError(
            f"{who} writes into the log directory, but none is set: call logger.set_logger_dir() first"
        )
    return _LOG_DIR


def unset_logger_dir() -> None:
    """Forget the log directory (and close its log file); monitors become no-ops again."""
    global _LOG_DIR, _FILE_HANDLER
    if _FILE_HANDLER is not None:
        LOGGER.removeHandler(_FILE_HANDLER)
        _FILE_HANDLER.close()
        _FILE_HANDLER = None
    _LOG_DIR = None
