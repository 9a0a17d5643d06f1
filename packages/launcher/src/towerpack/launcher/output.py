"""Per-process output: the stdout and stderr pipes of one process, copied as they come to the console
(prefixed lines and live bar updates), to optional log files, and to a tail of stderr for summaries."""

from __future__ import annotations

import collections
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from towerpack.launcher import console as console_module
from towerpack.launcher.console import Bars, Console, Stream
from towerpack.launcher.tasks import TaskId, TaskKind

_TERMINATORS = re.compile(rb"([\r\n])")
#: A "line" longer than this without a newline is passed on in pieces.
MAX_PENDING = 1 << 20


@dataclass(frozen=True)
class OutputOptions:
    """How rank output is shown: ``prefix`` on/off, ``ranks`` to show (None = all), ``log_dir`` for
    files, ``bars`` for progress bars."""

    prefix: bool = True
    ranks: frozenset[TaskId] | None = None
    log_dir: str | None = None
    tail_lines: int = 20
    bars: Bars = Bars.ONE

    def shows(self, task: TaskId) -> bool:
        return self.ranks is None or task in self.ranks


def log_paths(log_dir: str, task: TaskId, attempt: int) -> tuple[Path, Path]:
    """``DIR/rank.<r>/{stdout,stderr}`` (``DIR/ps.<i>/`` for parameter servers); restart ``k`` writes
    ``stdout.<k>`` and ``stderr.<k>`` beside them."""
    folder = Path(log_dir) / (f"ps.{task.index}" if task.kind is TaskKind.PS else f"rank.{task.index}")
    suffix = f".{attempt}" if attempt else ""
    return folder / f"stdout{suffix}", folder / f"stderr{suffix}"


class LineSplitter:
    """Splits a byte stream into lines, keeping between them the bar text a terminal would show.

    A carriage return starts a bar update (tqdm writes ``\\r<bar>``): ``bar`` is then the text after it,
    or the last non-empty text ended by ``\\r`` (``print(x, end="\\r")``). A newline ends a line; its
    visible text is what follows the last carriage return, or that bar text when nothing does.
    """

    def __init__(self) -> None:
        self._pending = bytearray()
        self._segment = b""  # last non-empty text ended by "\r" since the last newline
        self.in_bar = False

    def feed(self, data: bytes) -> list[bytes]:
        """Complete lines in ``data`` (and what came before it), without their newline."""
        lines = []
        parts = _TERMINATORS.split(data)
        for piece, term in zip(parts[::2], [*parts[1::2], None], strict=True):
            self._pending += piece
            if term is None:
                break
            text = bytes(self._pending)
            self._pending.clear()
            if term == b"\n":
                lines.append(text or self._segment)
                self._segment, self.in_bar = b"", False
            elif text:
                self._segment, self.in_bar = text, True
            else:
                self.in_bar = True
        if len(self._pending) > MAX_PENDING:
            lines.append(bytes(self._pending))
            self._pending.clear()
        return lines

    @property
    def bar(self) -> bytes | None:
        if not self.in_bar:
            return None
        return bytes(self._pending) or self._segment or None

    def close(self) -> list[bytes]:
        """What is left when the stream ends, as a last line (a bar's last state included)."""
        last = bytes(self._pending) or self._segment
        self._pending.clear()
        self._segment, self.in_bar = b"", False
        return [last] if last else []


class StreamCopier:
    """Copies the stdout and stderr pipes of one process, each in its own thread, as data arrives."""

    def __init__(
        self,
        prefix: bytes | None,
        show: bool,
        files: tuple[Path, Path] | None,
        tail_lines: int,
        console: Console | None = None,
        owner: str = "",
    ):
        self.prefix = prefix or b""
        self.show = show
        self.files = files
        self.owner = owner
        self.console = console
        self.tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
        self._threads: list[threading.Thread] = []

    def attach(self, stdout: IO[bytes], stderr: IO[bytes]) -> None:
        if self.files:
            self.files[0].parent.mkdir(parents=True, exist_ok=True)
        for pipe, stream, path in (
            (stdout, Stream.OUT, self.files and self.files[0]),
            (stderr, Stream.ERR, self.files and self.files[1]),
        ):
            thread = threading.Thread(target=self._copy, args=(pipe, stream, path), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _copy(self, pipe: IO[bytes], stream: Stream, path: Path | None) -> None:
        out = self.console or console_module.get()
        log = open(path, "wb") if path else None  # noqa: SIM115 - closed below, after the pipe ends
        splitter = LineSplitter()
        owner = f"{self.owner}:{stream.name}"
        shown_bar = None
        try:
            while data := os.read(pipe.fileno(), 1 << 16):
                if log:
                    log.write(data)
                    log.flush()
                for line in splitter.feed(data):
                    self._line(out, stream, owner, line)
                    shown_bar = None
                bar = splitter.bar
                if self.show and bar is not None and bar != shown_bar and out.mode is not Bars.NONE:
                    out.bar(stream, owner, self.prefix + bar)
                    shown_bar = bar
        except (OSError, ValueError):
            pass
        finally:
            for line in splitter.close():
                self._line(out, stream, owner, line)
            pipe.close()
            if log:
                log.close()

    def _line(self, out: Console, stream: Stream, owner: str, line: bytes) -> None:
        if stream is Stream.ERR:
            self.tail.append(line.decode(errors="replace"))
        if self.show:
            out.line(stream, self.prefix + line, owner)

    def join(self, timeout: float) -> None:
        """Wait for both pipes to drain (a detached grandchild may hold them open: do not wait forever)."""
        for thread in self._threads:
            thread.join(timeout)
