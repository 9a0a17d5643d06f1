"""The launcher's console: whole lines from every rank, and live progress bars that never garble them.

A rank's output reaches the console as lines (text ended by a newline) and bar updates (the text a
terminal would show after a carriage return, as tqdm writes it). Lines are written whole, one at a
time, whatever the number of ranks. Bars are drawn live where the launcher's stream is a terminal:
at the bottom of the screen, one bar (the rank whose bar started first, until it ends it) or, with
``--bars all``, one line per rank; a line from any rank is written above them and they are drawn
again. Where the stream is not a terminal (a file, a pipe, CI logs) each rank's bar is written as a
plain line, its latest state, every ``$TOWERPACK_PROGRESS_INTERVAL`` seconds (default 30), and its
final state when it ends (``--bars none``: only the final state). A launcher started over ssh relays
bar updates as plain carriage-return text, for the launcher that started it to draw.
"""

from __future__ import annotations

import enum
import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import IO

_UP = b"\x1b[A"
_CLEAR_DOWN = b"\x1b[J"
#: Seconds between two lines of a bar where the stream is not a terminal; the variable is the one
#: towerpack.dataflow.pipeline.progress reads for the ranks' own bars (this package does not depend on it).
INTERVAL_VAR = "TOWERPACK_PROGRESS_INTERVAL"
DEFAULT_INTERVAL = 30.0


class Bars(enum.Enum):
    ONE = "one"  # the bar of one rank at a time
    ALL = "all"  # a bar line per rank
    NONE = "none"  # only the final state of each bar
    RELAY = "relay"  # pass one rank's updates on as "\r<text>\r" (a launcher started over ssh)


@dataclass(frozen=True)
class _LoggedBar:
    at: float  # when the bar started or was last written as a line (time.monotonic)
    text: bytes  # that line (empty before the first)


class Stream(enum.Enum):
    OUT = 1
    ERR = 2


def _isatty(f: IO[bytes]) -> bool:
    try:
        return os.isatty(f.fileno())
    except (OSError, ValueError, AttributeError):
        return False


class Console:
    """Writes to ``out`` and ``err`` (binary streams) under one lock."""

    def __init__(self, out: IO[bytes], err: IO[bytes], bars: Bars = Bars.ONE, interval: float | None = None):
        self._files = {Stream.OUT: out, Stream.ERR: err}
        self._tty = {s: _isatty(f) for s, f in self._files.items()}
        self.mode = bars
        self._lock = threading.Lock()
        self._bars: dict[str, bytes] = {}  # owner -> text, in drawing order
        self._bar_stream: Stream | None = None
        self._drawn = 0  # bar lines on the screen now
        self._relayed: str | None = None  # the owner whose bar a relaying console passes on
        self._interval = interval if interval is not None else self._interval_from_env()
        self._logged: dict[str, _LoggedBar] = {}  # owner -> its bar's last line, where bars are logged

    def line(self, stream: Stream, data: bytes, owner: str | None = None) -> None:
        """Write ``data`` and a newline; a bar of ``owner`` ends (this line is its final state)."""
        with self._lock:
            if owner is not None and owner == self._relayed:
                self._relayed = None
            logged = self._logged.pop(owner, None)
            if logged is not None and logged.text == data:
                return  # the bar's final state is in the log already
            ends_bar = owner in self._bars
            redraw = bool(self._drawn) and (ends_bar or self._shares_screen(stream))
            if redraw:
                self._erase()
            if ends_bar:
                del self._bars[owner]
            self._write(stream, data + b"\n")
            if redraw:
                self._draw()
            if not self._bars:
                self._bar_stream = None

    def bar(self, stream: Stream, owner: str, text: bytes) -> None:
        """Show ``text`` as ``owner``'s bar (where bars are drawn at all)."""
        with self._lock:
            if self.mode is Bars.RELAY:  # one rank's bar at a time, as plain text
                self._relayed = self._relayed or owner
                if owner == self._relayed:
                    self._write(stream, b"\r" + text + b"\r")
                return
            if self.mode is Bars.NONE:
                return
            if not self._tty[stream]:
                self._log_bar(stream, owner, text)
                return
            if self._bar_stream not in (None, stream):
                return
            if self.mode is Bars.ONE and self._bars and owner not in self._bars:
                return  # another rank's bar is showing
            self._bar_stream = stream
            self._erase()
            self._bars[owner] = text
            self._draw()

    def close(self) -> None:
        """Leave the cursor below any bar still drawn."""
        with self._lock:
            if self._drawn:
                self._write(self._bar_stream, b"\n")
            self._bars.clear()
            self._drawn = 0
            self._bar_stream = None

    def _interval_from_env(self) -> float:
        value = os.environ.get(INTERVAL_VAR, "").strip()
        try:
            seconds = float(value) if value else DEFAULT_INTERVAL
        except ValueError:
            seconds = -1.0
        if not 0 < seconds < float("inf"):
            seconds = DEFAULT_INTERVAL
            problem = f"{INTERVAL_VAR} must be a positive number of seconds, got {value!r}"
            self._write(Stream.ERR, f"launch: {problem}; using {DEFAULT_INTERVAL:g}\n".encode())
        return seconds

    # -- writing (lock held) ---------------------------------------------------------------------------
    def _log_bar(self, stream: Stream, owner: str, text: bytes) -> None:
        """A bar in a log: its latest state as a line once ``interval`` has passed since the last one."""
        now = time.monotonic()
        last = self._logged.setdefault(owner, _LoggedBar(now, b""))
        if now - last.at >= self._interval:
            text = text.replace(b"\r", b"")
            self._write(stream, text + b"\n")
            self._logged[owner] = _LoggedBar(now, text)

    # -- drawing (lock held) ---------------------------------------------------------------------------
    def _shares_screen(self, stream: Stream) -> bool:
        return stream is self._bar_stream or (self._tty[stream] and self._tty[self._bar_stream])

    def _erase(self) -> None:
        if self._drawn:
            self._write(self._bar_stream, b"\r" + _UP * (self._drawn - 1) + _CLEAR_DOWN, flush=False)
            self._drawn = 0

    def _draw(self) -> None:
        if not self._bars:
            return
        width = self._width(self._bar_stream)
        shown = [_fit(text, width) for text in self._bars.values()]
        self._write(self._bar_stream, b"\n".join(shown))
        self._drawn = len(shown)

    def _width(self, stream: Stream) -> int:
        try:
            return os.get_terminal_size(self._files[stream].fileno()).columns or 80
        except (OSError, ValueError):
            return 80

    def _write(self, stream: Stream, data: bytes, flush: bool = True) -> None:
        f = self._files[stream]
        try:
            f.write(data)
            if flush:
                f.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass


def _fit(text: bytes, width: int) -> bytes:
    """One screen line at most, so that the cursor movements over the bars stay right."""
    chars = text.decode(errors="replace").replace("\r", "")
    return chars[: max(width - 1, 1)].encode()


_console: Console | None = None
_console_lock = threading.Lock()


def get() -> Console:
    """The process's console (on its stdout and stderr)."""
    global _console
    with _console_lock:
        if _console is None:
            _console = Console(sys.stdout.buffer, sys.stderr.buffer)
        return _console


def set_bars(mode: Bars) -> None:
    get().mode = mode


def say(msg: str) -> None:
    """A message of the launcher itself: ``launch: <msg>`` on stderr."""
    get().line(Stream.ERR, f"launch: {msg}".encode())
