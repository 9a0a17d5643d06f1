"""Small chief-side helpers: how long training will take, notifications, a debugging shell."""

from __future__ import annotations

import importlib.util
import logging
import os
import statistics
import subprocess
import time
from collections import deque

from towerpack.utils.utils import humanize_time_delta

from ..callback import Callback
from ..choice import Choice

logger = logging.getLogger("towerpack.trainer.callbacks")

__all__ = ["EstimatedTimeLeft", "InjectShell", "SendStat", "humanize_seconds"]


def humanize_seconds(sec: float) -> str:
    """An estimate for people: ``3725`` -> ``'1 hour 2 minutes'`` (the two largest units of
    ``humanize_time_delta``), ``5.25`` -> ``'5.2 seconds'``, ``42.4`` -> ``'42 seconds'``."""
    sec = max(0.0, float(sec))
    return humanize_time_delta(round(sec, 1) if sec < 10 else round(sec), max_units=2)


class EstimatedTimeLeft(Callback):
    """After each epoch, log the estimated time left until ``max_epoch``.

    The estimate is the median (or mean with ``median=False``) duration of the last
    ``last_k_epochs`` epochs, times the epochs left; it counts everything, callbacks included.
    ``estimate`` holds the latest value in seconds.
    """

    def __init__(self, last_k_epochs: int = 5, median: bool = True):
        if last_k_epochs < 1:
            raise ValueError(f"last_k_epochs must be at least 1, got {last_k_epochs}")
        self._times = deque(maxlen=last_k_epochs)
        self._median = median
        self.estimate: float | None = None

    def _before_train(self) -> None:
        self._last = time.perf_counter()

    def _trigger_epoch(self) -> None:
        now = time.perf_counter()
        self._times.append(now - self._last)
        self._last = now
        left = self.trainer.max_epoch - self.epoch_num
        if left <= 0:
            self.estimate = 0.0
            return
        per_epoch = statistics.median(self._times) if self._median else statistics.fmean(self._times)
        self.estimate = per_epoch * left
        logger.info("Estimated time left: %s", humanize_seconds(self.estimate))


class SendStat(Callback):
    """At every trigger (by default, after every epoch) run a shell command made from the latest
    values of some scalars, e.g. to send them to a phone.

    ``command`` is formatted with ``{name}`` fields for the ``names`` (one name or a list), e.g.
    ``SendStat('notify-send "val error {val-error:.3f}"', 'val-error')``. A command that fails
    (non-zero exit) is logged; training goes on.
    """

    def __init__(self, command: str, names):
        self.command = command
        self.names = [names] if isinstance(names, str) else list(names)

    def _trigger(self) -> None:
        values = {name: self.trainer.monitors.get_latest(name) for name in self.names}
        _run_command(self.command.format(**values))


def _run_command(cmd: str) -> None:
    result = subprocess.run(cmd, shell=True, check=False)
    if result.returncode != 0:
        logger.error("Command %r failed with exit code %d", cmd, result.returncode)


class Shell(Choice):
    """The shell ``InjectShell`` opens."""

    IPYTHON = "ipython"
    PDB = "pdb"


class InjectShell(Callback):
    """At every trigger (by default, after every epoch), if ``file`` exists, open a shell
    (IPython's, or pdb with ``shell='pdb'``) inside the training process, with ``self`` and
    ``trainer`` at hand: inspect or change anything, then leave it to continue training. Create
    the file (``touch INJECT_SHELL.tmp``) to get a shell at the next trigger, and delete it to
    stop getting them; it is deleted after training.
    """

    def __init__(self, file: str = "INJECT_SHELL.tmp", shell: Shell | str = Shell.IPYTHON):
        shell = Shell.parse(shell, "shell")
        if shell is Shell.IPYTHON and importlib.util.find_spec("IPython") is None:
            raise ValueError(
                "InjectShell(shell='ipython') needs IPython (pip install ipython); or use shell='pdb'"
            )
        self._file = file
        self._shell = shell

    def _trigger(self) -> None:
        if os.path.isfile(self._file):
            logger.info("%s exists: opening a %s shell", self._file, self._shell.value)
            self._inject()

    def _inject(self) -> None:
        trainer = self.trainer  # noqa: F841  (for the user, in the shell)
        if self._shell is Shell.IPYTHON:
            import IPython

            IPython.embed()
        else:
            import pdb

            pdb.set_trace()

    def _after_train(self) -> None:
        if os.path.isfile(self._file):
            os.unlink(self._file)
