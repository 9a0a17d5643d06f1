"""The towerpack logger and the log directory of a run.

One ``logging.Logger`` named ``towerpack`` (``LOGGER``) writes to stderr with a short prefix
(``[MMDD HH:MM:SS file.py:line] LEVEL message``); importing this module installs that handler.
Every towerpack logger (``towerpack.trainer.*``, ``towerpack.dataflow.*``, ``towerpack.utils.*``)
is a child of it, so once it is set up their records go through it too, and into the log file
that :func:`set_logger_dir` adds. Records also propagate to the root logger (pytest's ``caplog``
and an application's own handlers see them).

What happens to an existing, non-empty log directory is decided by ``action``; without one, by
``$TOWERPACK_LOGDIR_ACTION``; without that, the user is asked, as the reference did, but only when
stdin and stderr are a terminal; otherwise it is an error (a job never waits on stdin). In a job of
several processes only rank 0 acts on the directory: the other ranks use it as it is and write no
log file there, so no rank deletes what another has just created.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import shutil
import sys
import time

__all__ = [
    "LOGGER",
    "DirAction",
    "addFilter",
    "auto_set_dir",
    "critical",
    "debug",
    "error",
    "exception",
    "get_logger_dir",
    "info",
    "setLevel",
    "set_logger_dir",
    "warn",
    "warning",
]

LOGGER = logging.getLogger("towerpack")
# The reference's name for its logging.Logger (its tests pass it to assertLogs).
_logger = LOGGER
_FORMAT = "[%(asctime)s %(filename)s:%(lineno)d] %(levelname)s %(message)s"
_DATE_FORMAT = "%m%d %H:%M:%S"


class _StderrHandler(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is when a record is emitted (tools and tests replace it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


if not LOGGER.handlers:
    _handler = _StderrHandler()
    _handler.setFormatter(logging.Formatter(_FORMAT, datefmt=_DATE_FORMAT))
    LOGGER.addHandler(_handler)
    LOGGER.setLevel(logging.INFO)

debug = LOGGER.debug
info = LOGGER.info
warning = LOGGER.warning
#: The reference's spelling (``Logger.warn`` is deprecated in the standard library).
warn = LOGGER.warning
error = LOGGER.error
critical = LOGGER.critical
exception = LOGGER.exception
setLevel = LOGGER.setLevel
addFilter = LOGGER.addFilter

#: The file that ``set_logger_dir`` writes the log into, inside the directory.
LOG_FILE = "log.log"


class DirAction(enum.Enum):
    """What ``set_logger_dir`` does with a directory that exists and is not empty (the reference's
    letters; a word is taken by its first letter)."""

    KEEP = "k"
    BACKUP = "b"
    DELETE = "d"
    NEW = "n"
    QUIT = "q"

    @classmethod
    def parse(cls, value: DirAction | str) -> DirAction:
        if isinstance(value, cls):
            return value
        letter = str(value).strip().lower()[:1]
        try:
            return cls(letter)
        except ValueError:
            allowed = ", ".join(repr(m.value) for m in cls)
            raise ValueError(f"unknown logger dir action {value!r}; choose one of {allowed}") from None


_EXPLAINED = {
    DirAction.KEEP: "keep: use the directory as it is (appending, resuming)",
    DirAction.BACKUP: "backup: rename it to <dir>-<time> and start an empty one",
    DirAction.DELETE: "delete: remove it and start an empty one",
    DirAction.NEW: "new: leave it alone and log into <dir>-<time> instead",
    DirAction.QUIT: "quit: refuse (raise FileExistsError)",
}
#: The directory set by ``set_logger_dir`` (None before); read it with ``get_logger_dir()``.
LOG_DIR: str | None = None
_FILE_HANDLER: logging.Handler | None = None


def _fresh_name(dirname: str) -> str:
    """``<dirname>-<time>``, with a counter if that exists already."""
    base = f"{dirname}-{time.strftime('%m%d-%H%M%S')}"
    name, i = base, 1
    while os.path.exists(name):
        name, i = f"{base}-{i}", i + 1
    return name


def _is_nonempty_dir(dirname: str) -> bool:
    return os.path.isdir(dirname) and bool(os.listdir(dirname))


#: The action for a non-empty log directory when the code gives none (``k``, ``b``, ``d``, ``n``, ``q``).
ACTION_VAR = "TOWERPACK_LOGDIR_ACTION"


def set_logger_dir(dirname: str | os.PathLike, action: DirAction | str | None = None) -> str:
    """Use ``dirname`` for logs, checkpoints, event files and stats.json; returns the directory used.

    Args:
        dirname: the directory; created if missing. The log is appended to ``<dirname>/log.log``.
        action: what to do if it exists and is not empty: a ``DirAction`` or one of ``k`` (keep),
            ``b`` (backup), ``d`` (delete), ``n`` (new directory with a time suffix) or ``q`` (quit).
            Without one: ``$TOWERPACK_LOGDIR_ACTION``, else a question on a terminal, else an error;
            nothing is ever overwritten silently.

    On a rank other than 0 of a multi-process job the directory is only recorded: rank 0 decides
    what happens to it and writes the log file.
    """
    global LOG_DIR, _FILE_HANDLER
    dirname = os.path.normpath(os.fspath(dirname))
    rank = _rank()
    if rank:
        _close_file_handler()
        LOG_DIR = dirname
        info("Log directory: %s (rank 0 keeps it and its log file; rank %d writes none there)", dirname, rank)
        return dirname
    if action is None or action == "":
        action = os.environ.get(ACTION_VAR) or None
    action = None if action is None else DirAction.parse(action)
    if _is_nonempty_dir(dirname):
        if action is None and _interactive():
            action = _ask(dirname)
        if action is None or action is DirAction.QUIT:
            options = "; ".join(f"{k.value!r} = {v}" for k, v in _EXPLAINED.items())
            raise FileExistsError(
                f"log directory {dirname} exists and is not empty; pass action= to set_logger_dir "
                f"(or TrainConfig(logdir_action=...)) or set {ACTION_VAR}: {options}"
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
    _close_file_handler()
    _FILE_HANDLER = logging.FileHandler(os.path.join(dirname, LOG_FILE), encoding="utf-8")
    _FILE_HANDLER.setFormatter(logging.Formatter(_FORMAT, datefmt=_DATE_FORMAT))
    LOGGER.addHandler(_FILE_HANDLER)
    LOG_DIR = dirname
    info("Log directory: %s", dirname)
    info("Argv: %s", " ".join(sys.argv))
    return dirname


def _rank() -> int:
    from towerpack.utils.placement import placement

    return placement().rank


def _interactive() -> bool:
    return sys.stdin is not None and sys.stdin.isatty() and sys.stderr.isatty()


def _ask(dirname: str) -> DirAction:
    """Ask on the terminal what to do with ``dirname``, until the answer is one of the actions."""
    warning("Log directory %s exists and is not empty.", dirname)
    for member, text in _EXPLAINED.items():
        print(f"  {member.value}: {text}", file=sys.stderr)
    while True:
        print("Action [k/b/d/n/q]: ", end="", file=sys.stderr, flush=True)
        answer = sys.stdin.readline()
        if not answer:  # end of input
            return DirAction.QUIT
        if answer.strip():
            with contextlib.suppress(ValueError):
                return DirAction.parse(answer)


def auto_set_dir(action: DirAction | str | None = None, name: str | None = None) -> str:
    """``set_logger_dir('train_log/<script name>[:name]', action)``, named after the running script
    (``interactive`` in a REPL or notebook, where there is no script)."""
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    base = os.path.splitext(os.path.basename(script))[0] if script else "interactive"
    dirname = os.path.join("train_log", base + (f":{name}" if name else ""))
    return set_logger_dir(dirname, action=action)


def get_logger_dir() -> str | None:
    """The directory set by ``set_logger_dir``, or None (then nothing is written to disk)."""
    return LOG_DIR


def require_logger_dir(who: str) -> str:
    """The log directory, or a ValueError saying that ``who`` writes there and none is set."""
    if LOG_DIR is None or not os.path.isdir(LOG_DIR):
        raise ValueError(
            f"{who} writes into the log directory, but none is set: call logger.set_logger_dir() first"
        )
    return LOG_DIR


def unset_logger_dir() -> None:
    """Forget the log directory (and close its log file); monitors become no-ops again."""
    global LOG_DIR
    _close_file_handler()
    LOG_DIR = None


def _close_file_handler() -> None:
    global _FILE_HANDLER
    if _FILE_HANDLER is not None:
        LOGGER.removeHandler(_FILE_HANDLER)
        _FILE_HANDLER.close()
        _FILE_HANDLER = None
