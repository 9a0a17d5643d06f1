"""A tiny helper that outlives a SIGKILLed launcher just long enough to end the job's processes.

The launcher starts ``python -m towerpack.launcher.watchdog TAG`` with a pipe on its stdin and never
writes to it. When the launcher exits for any reason, SIGKILL included, the pipe closes, the read below
returns, and every process tagged with ``TAG`` (prefix match) is terminated.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

from towerpack.launcher.tagging import TAG_VAR, terminate


def start(tag: str) -> subprocess.Popen:
    """Start the watchdog for ``tag``; keep the returned handle (its stdin) open while the job runs."""
    env = {k: v for k, v in os.environ.items() if k != TAG_VAR}
    return subprocess.Popen(
        [sys.executable, "-m", "towerpack.launcher.watchdog", tag],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )


def stop(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """Close the watchdog's pipe (it sweeps once more) and wait for it."""
    with contextlib.suppress(OSError):
        proc.stdin.close()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main(argv: list[str]) -> int:
    tag = argv[0]
    # The launcher's own Ctrl-C reaches this process group too; the pipe alone decides when to act.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while os.read(0, 65536):
        pass
    terminate(tag, prefix=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
