"""Progress bars that also work in logs: a tqdm bar on a terminal, periodic plain lines elsewhere.

A tqdm bar redraws itself with carriage returns, which a log file or a pipe (a batch job's output,
``... | tee log``) shows only when the bar ends. ``progress_bar`` returns the usual tqdm bar where the
stream is a terminal, or where a ``launch`` job's launcher reads it (the launcher draws ranks' bars
itself and turns them into lines when its own output is not a terminal); anywhere else it returns a
bar that writes its state as one plain line every ``interval`` seconds and when it ends, e.g.
``epoch 3: 1200/5000 (24%), 41.2it/s, elapsed 00:29, eta 01:32``.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Any

import tqdm

__all__ = [
    "DEFAULT_INTERVAL",
    "INTERVAL_VAR",
    "LAUNCHED_VAR",
    "LineBar",
    "progress_bar",
    "progress_interval",
    "writes_lines",
]

#: Seconds between two progress lines in a log, unless an argument or ``INTERVAL_VAR`` says otherwise.
DEFAULT_INTERVAL = 30.0
INTERVAL_VAR = "TOWERPACK_PROGRESS_INTERVAL"
#: Set by ``launch`` for every rank: the launcher reading the rank's output draws its bars.
LAUNCHED_VAR = "TOWERPACK_JOB_ID"

_LINE_FORMAT = (
    "{n_fmt}/{total_fmt} ({percentage:.0f}%), {rate_fmt}, elapsed {elapsed}, eta {remaining}{postfix}"
)
_LINE_FORMAT_NO_TOTAL = "{n_fmt} {unit}, {rate_fmt}, elapsed {elapsed}{postfix}"


def progress_interval(interval: float | None = None) -> float:
    """Seconds between progress lines: ``interval``, else ``$TOWERPACK_PROGRESS_INTERVAL``, else 30."""
    source, value = "interval", interval
    if value is None:
        source, value = INTERVAL_VAR, os.environ.get(INTERVAL_VAR, "").strip() or None
    if value is None:
        return DEFAULT_INTERVAL
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{source} must be a number of seconds, got {value!r}") from None
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(f"{source} must be a positive number of seconds, got {value!r}")
    return seconds


def _isatty(file: IO[str]) -> bool:
    try:
        return file.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def writes_lines(file: IO[str]) -> bool:
    """Whether a bar on ``file`` should be plain lines: not a terminal, and not read by ``launch``."""
    return not _isatty(file) and not os.environ.get(LAUNCHED_VAR)


class _LineFile:
    """``file`` without the carriage returns and bare newlines tqdm writes around a bar."""

    def __init__(self, file: IO[str]) -> None:
        self._file = file

    def write(self, text: str) -> None:
        if text.strip("\r\n"):
            self._file.write(text)

    def flush(self) -> None:
        self._file.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)


class LineBar(tqdm.tqdm):
    """A tqdm bar that writes each refresh as a whole line (no carriage return, no bar graphic)."""

    def __init__(self, *args: Any, file: IO[str], **kwargs: Any) -> None:
        self._shown_n: float | None = None
        self._closing = False
        super().__init__(*args, file=_LineFile(file), **kwargs)

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        if self._closing and self.n == self._shown_n:
            return True  # the last line written already holds the final count
        if msg is None:
            msg = str(self)
        if msg:  # an empty message is tqdm clearing the bar: nothing to take back in a log
            self.fp.write(msg + "\n")
            self.fp.flush()
            self._shown_n = self.n
        return True

    def close(self) -> None:
        self._closing = True
        super().close()


def progress_bar(
    *,
    file: IO[str] | None = None,
    interval: float | None = None,
    label: str = "",
    **kwargs: Any,
) -> tqdm.tqdm:
    """A tqdm bar on ``file`` (default stderr) taking tqdm's own ``kwargs`` (``total``, ``unit``, ...).

    Where ``writes_lines(file)``, the bar is a ``LineBar`` refreshed every ``interval`` seconds
    (``progress_interval``), its lines starting with ``label`` (or ``desc``); elsewhere ``label`` is not
    shown and
    the bar is exactly ``tqdm.tqdm(file=file, **kwargs)``.
    """
    file = sys.stderr if file is None else file
    if not writes_lines(file):
        return tqdm.tqdm(file=file, **kwargs)
    seconds = progress_interval(interval)
    label = label or kwargs.pop("desc", None) or ""
    for drawing_only in ("dynamic_ncols", "ncols", "ascii", "mininterval", "miniters", "bar_format"):
        kwargs.pop(drawing_only, None)
    prefix = f"{label}: ".replace("{", "{{").replace("}", "}}") if label else ""
    line_format = _LINE_FORMAT if kwargs.get("total") else _LINE_FORMAT_NO_TOTAL
    # miniters=1: tqdm then checks the clock at every update, and refreshes once mininterval has passed
    return LineBar(file=file, bar_format=prefix + line_format, mininterval=seconds, miniters=1, **kwargs)
