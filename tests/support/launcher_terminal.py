"""`launch` on a pseudo-terminal, and the screen a terminal would show for what it writes."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
import threading
import time

from support.launcher_run import LAUNCH


class Screen:
    """What a terminal shows for the little the launcher writes: text, CR, LF, ESC[A (up), ESC[J
    (clear to the end of the screen)."""

    def __init__(self) -> None:
        self.lines, self.row, self.col = [""], 0, 0

    def feed(self, text: str) -> None:
        i = 0
        while i < len(text):
            if text.startswith("\x1b[A", i):
                self.row, i = max(self.row - 1, 0), i + 3
                continue
            if text.startswith("\x1b[J", i):
                del self.lines[self.row + 1 :]
                self.lines[self.row] = self.lines[self.row][: self.col]
                i += 3
                continue
            ch, i = text[i], i + 1
            if ch == "\r":
                self.col = 0
            elif ch == "\n":
                self.row += 1
                self.lines += [""] * (self.row + 1 - len(self.lines))
            else:
                line = self.lines[self.row].ljust(self.col)
                self.lines[self.row] = line[: self.col] + ch + line[self.col + 1 :]
                self.col += 1

    def shown(self) -> list[str]:
        return [line.rstrip() for line in self.lines if line.strip()]


class Terminal:
    """`launch` with its stdout and stderr on one pseudo-terminal (120 columns), read in a thread."""

    def __init__(self, *args: str, env: dict | None = None):
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.proc = subprocess.Popen(
            [*LAUNCH, *args],
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            close_fds=True,
            env=dict(os.environ, **(env or {})),
        )
        os.close(slave)
        self.raw = b""
        self.screen = Screen()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(master,), daemon=True)
        self._thread.start()

    def _read(self, fd: int) -> None:
        try:
            while data := os.read(fd, 4096):
                with self._lock:
                    self.raw += data
                    self.screen.feed(data.decode(errors="replace"))
        except OSError:  # EIO: every writer closed the terminal
            pass
        finally:
            os.close(fd)

    def wait_screen(self, expected: list[str], timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                shown = self.screen.shown()
            if shown == expected:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the screen shows {shown}, not {expected}")
            time.sleep(0.02)

    def finish(self, timeout: float = 30) -> int:
        try:
            code = self.proc.wait(timeout)
        finally:
            self.proc.kill()
            self.proc.wait()
        self._thread.join(5)
        return code
