"""Run the real ``dataflow`` command for tests and follow what it prints."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent.parent


def dataflow_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "towerpack.dataflow.cli", *args]


def dataflow_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), env.get("PYTHONPATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


class ServerProcess:
    """``dataflow serve`` in a subprocess; its output lines are collected in ``lines``."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            dataflow_cmd("serve", *args),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=dataflow_env(),
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for_line(self, text: str, timeout: float = 20, after: int = 0) -> int:
        """Wait until a line containing ``text`` appears at index >= ``after``; return its index."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i in range(after, len(self.lines)):
                if text in self.lines[i]:
                    return i
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.05)
        raise AssertionError(f"server never printed {text!r}; output:\n{self.output}")

    def consumers(self) -> int | None:
        counts = [line for line in self.lines if "consumers connected:" in line]
        return int(counts[-1].rsplit(":", 1)[1]) if counts else None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reader.join(5)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
