"""Per-rank output: prefixed lines on the console, optional log files, and a tail of stderr for summaries."""

from __future__ import annotations

import collections
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO

_console_lock = threading.Lock()


@dataclass(frozen=True)
class OutputOptions:
    """How rank output is shown: ``prefix`` on/off, ``ranks`` to show (None = all), ``log_dir`` for files."""

    prefix: bool = True
    ranks: frozenset[str] | None = None
    log_dir: str | None = None
    tail_lines: int = 20

    def shows(self, name: str) -> bool:
        return self.ranks is None or name in self.ranks


def console_write(stream: IO[bytes], data: bytes) -> None:
    """Write whole lines to the console; one lock keeps lines of different ranks from interleaving."""
    with _console_lock:
        try:
            stream.write(data)
            stream.flush()
        except (BrokenPipeError, ValueError):
            pass


def log_paths(log_dir: str, name: str, attempt: int) -> tuple[Path, Path]:
    """``DIR/rank.<r>/{stdout,stderr}`` (``DIR/ps.<i>/`` for parameter servers); restart ``k`` writes
    ``stdout.<k>`` and ``stderr.<k>`` beside them."""
    folder = Path(log_dir) / (f"ps.{name[2:]}" if name.startswith("ps") else f"rank.{name}")
    suffix = f".{attempt}" if attempt else ""
    return folder / f"stdout{suffix}", folder / f"stderr{suffix}"


class StreamCopier:
    """Copies the stdout and stderr pipes of one process, line by line, each in its own thread."""

    def __init__(self, prefix: bytes | None, show: bool, files: tuple[Path, Path] | None, tail_lines: int):
        self.prefix = prefix or b""
        self.show = show
        self.files = files
        self.tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
        self._threads: list[threading.Thread] = []

    def attach(self, stdout: IO[bytes], stderr: IO[bytes]) -> None:
        if self.files:
            self.files[0].parent.mkdir(parents=True, exist_ok=True)
        for pipe, console, path, keep in (
            (stdout, sys.stdout.buffer, self.files and self.files[0], False),
            (stderr, sys.stderr.buffer, self.files and self.files[1], True),
        ):
            thread = threading.Thread(target=self._copy, args=(pipe, console, path, keep), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _copy(self, pipe: IO[bytes], console: IO[bytes], path: Path | None, keep_tail: bool) -> None:
        log = open(path, "wb") if path else None  # noqa: SIM115 - closed below, after the pipe ends
        try:
            for line in iter(pipe.readline, b""):
                if not line.endswith(b"\n"):
                    line += b"\n"
                if log:
                    log.write(line)
                    log.flush()
                if keep_tail:
                    self.tail.append(line.decode(errors="replace").rstrip("\n"))
                if self.show:
                    console_write(console, self.prefix + line)
        except (OSError, ValueError):
            pass
        finally:
            pipe.close()
            if log:
                log.close()

    def join(self, timeout: float) -> None:
        """Wait for both pipes to drain (a detached grandchild may hold them open: do not wait forever)."""
        for thread in self._threads:
            thread.join(timeout)
