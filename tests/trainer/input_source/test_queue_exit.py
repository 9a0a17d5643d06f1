"""A training script using QueueInput over an endless DataFlow exits promptly when training ends."""

from __future__ import annotations

import pytest

from support.procs import run_python

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(120)]

SCRIPT = """
import sys, threading
import numpy as np
sys.path.insert(0, sys.argv[1])
from support.trainer_models import SoftmaxClassifier
from towerpack.trainer import QueueInput, SimpleTrainer, TrainConfig, launch_train_with_config


class Endless:
    def reset_state(self):
        pass

    def __len__(self):
        return 10

    def __iter__(self):
        while True:
            yield [np.zeros((8, 8), np.float32), np.zeros(8, np.int32)]


config = TrainConfig(model=SoftmaxClassifier(), data=QueueInput(Endless()), steps_per_epoch=10, max_epoch=2)
launch_train_with_config(config, SimpleTrainer())
alive = [t.name for t in threading.enumerate() if "enqueue" in t.name]
print("ENQUEUE_THREADS", alive)
"""


def test_queue_input_script_exits_cleanly(request):
    # run_python fails the test if the script does not exit within the timeout.
    proc = run_python(SCRIPT, str(request.config.rootpath / "tests"), timeout=90)
    assert "ENQUEUE_THREADS []" in proc.stdout  # the thread was stopped, not left to the interpreter
    assert "Training has finished" in proc.stderr
