"""The trainer's ProgressBar in a log: periodic plain lines where stderr is not a terminal, the usual
tqdm bar where it is one."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import sys
import termios
import threading
import time

import pytest

from support.callback_runs import train_classifier
from support.trainer_models import blobs
from towerpack.dataflow.pipeline.progress import INTERVAL_VAR, LAUNCHED_VAR
from towerpack.trainer.callbacks.base import Callback
from towerpack.trainer.callbacks.steps import ProgressBar

pytestmark = pytest.mark.usefixtures("graph")

LINE = re.compile(
    r"^epoch (\d+): (\d+)/(\d+) \((\d+)%\), +[\d.?]+it/s, elapsed \d\d:\d\d, eta [\d:?]+(, cost=[-+\d.e]+)?$"
)


class SlowSteps(Callback):
    """Each step takes at least ``seconds``: an epoch lasts long enough for several progress lines."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def _trigger_step(self):
        time.sleep(self.seconds)


@pytest.fixture
def data():
    x, label = blobs(n=64, seed=3)
    return x, label


@pytest.fixture(autouse=True)
def _not_launched(monkeypatch):
    monkeypatch.delenv(LAUNCHED_VAR, raising=False)
    monkeypatch.delenv(INTERVAL_VAR, raising=False)


@pytest.mark.timeout(60)
def test_a_piped_stderr_gets_a_progress_line_per_interval(data, capsys):
    callbacks = [ProgressBar(["cost"], interval=0.4), SlowSteps(0.1)]
    train_classifier(callbacks, *data, steps=20, epochs=2, extra_callbacks=[])
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = [m for m in map(LINE.match, err.splitlines()) if m]
    assert lines and all(int(m.group(3)) == 20 for m in lines), err
    for epoch in (1, 2):
        counts = [int(m.group(2)) for m in lines if m.group(1) == str(epoch)]
        # 2 s an epoch at one line per 0.4 s: several lines before the end, counts rising, then 20/20
        assert len([c for c in counts if c < 20]) >= 4, err
        assert counts == sorted(set(counts)) and counts[-1] == 20, counts
    assert all(m.group(5) for m in lines if int(m.group(2)) > 0), err  # the fetched cost is shown


@pytest.mark.timeout(60)
def test_the_interval_comes_from_the_environment(data, capsys, monkeypatch):
    monkeypatch.setenv(INTERVAL_VAR, "0.3")
    train_classifier([ProgressBar(), SlowSteps(0.1)], *data, steps=12, epochs=1, extra_callbacks=[])
    counts = [int(m.group(2)) for m in map(LINE.match, capsys.readouterr().err.splitlines()) if m]
    assert len(counts) >= 4 and counts[-1] == 12, counts


def test_a_bad_interval_is_named():
    with pytest.raises(ValueError, match="interval must be a positive number of seconds, got -1"):
        ProgressBar(interval=-1)


@pytest.mark.timeout(60)
def test_a_bar_on_a_terminal_is_unchanged(data, monkeypatch):
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a 100-column terminal
    screen = bytearray()

    def read():
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            if not chunk:
                return
            screen.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    with open(slave, "w", buffering=1, closefd=True) as tty:
        monkeypatch.setattr(sys, "stderr", tty)
        train_classifier(
            [ProgressBar(interval=0.2), SlowSteps(0.05)], *data, steps=20, epochs=1, extra_callbacks=[]
        )
        tty.flush()
        monkeypatch.undo()
    reader.join(5)
    os.close(master)
    text = screen.decode(errors="replace")
    updates = [u for u in text.split("\r") if u.strip()]
    # tqdm's own redraws: many carriage-return updates with a bar graphic, no plain progress lines
    assert len(updates) >= 3, text
    assert re.search(r"100%\|█+\| 20/20 \[", text), text
    assert not re.search(r"epoch 1: \d+/20", text), text
