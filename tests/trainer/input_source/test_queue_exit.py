"""A training script using QueueInput over an endless DataFlow exits promptly and quietly.

At the end of training the enqueue thread is blocked on a full queue (the script waits for
that); stopping it must not cancel the pending enqueue, which TensorFlow reports on stderr as
"Local rendezvous is aborting with status: CANCELLED".
"""

from __future__ import annotations

import pytest

from support.procs import run_python

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(120)]

SCRIPT = """
import sys, threading, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from support.trainer_models import SoftmaxClassifier
from towerpack.trainer import Callback, QueueInput, SimpleTrainer, TrainConfig, launch_train_with_config


class Endless:
    def reset_state(self):
        pass

    def __len__(self):
        return 10

    def __iter__(self):
        while True:
            yield [np.zeros((8, 8), np.float32), np.zeros(8, np.int32)]


class WaitForFullQueue(Callback):
    # After the last epoch, until the enqueue thread is blocked on the full queue.
    def _setup_graph(self):
        self.size = self.graph.get_tensor_by_name("QueueInput/queue_size:0")

    def _trigger_epoch(self):
        if self.epoch_num == self.trainer.max_epoch:
            while self.trainer.sess.run(self.size) < 50:
                time.sleep(0.01)
            time.sleep(0.2)
            print("QUEUE_FULL", flush=True)


data = QueueInput(Endless())
config = TrainConfig(
    model=SoftmaxClassifier(), data=data, callbacks=[WaitForFullQueue()], steps_per_epoch=10, max_epoch=2
)
launch_train_with_config(config, SimpleTrainer())
alive = [t.name for t in threading.enumerate() if "enqueue" in t.name]
print("ENQUEUE_THREADS", alive)
"""


def test_queue_input_script_exits_cleanly_and_quietly(request):
    # run_python fails the test if the script does not exit within the timeout. TensorFlow's
    # own logging is on (level 0), as it is for a user who did not turn it down.
    proc = run_python(
        SCRIPT, str(request.config.rootpath / "tests"), timeout=90, env={"TF_CPP_MIN_LOG_LEVEL": "0"}
    )
    assert "QUEUE_FULL" in proc.stdout
    assert "ENQUEUE_THREADS []" in proc.stdout  # the thread was stopped, not left to the interpreter
    assert "Training has finished" in proc.stderr
    assert "Local rendezvous" not in proc.stderr
    assert "CANCELLED" not in proc.stderr
