"""Pre-emption end to end: a Horovod or TF-server job with AutoResumeTrainConfig and the default callbacks.

Usage: preempt_train.py LOGDIR horovod|tf-server
Every worker reads LOGDIR (the checkpoint and stats.json, so all start at the same epoch); the chief
saves a checkpoint there after each epoch. 3 epochs of 5 steps, each step at least 50 ms. Each worker
appends 'start <epoch> <global_step>' and 'end <global_step>' to LOGDIR/steps.<rank>; the chief writes
LOGDIR/ready once global step 7 is done, for the test to send its signal.
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/, for support.*

from support.dist_models import RankSlices, Regression64, regression_data
from towerpack.trainer import AutoResumeTrainConfig, Callback, ModelSaver, launch_train_with_config

READY_STEP = 7
logdir, backend = Path(sys.argv[1]), sys.argv[2]
if backend == "horovod":
    from towerpack.trainer import HorovodTrainer

    trainer = HorovodTrainer()
    rank, size = trainer.rank, trainer.size
else:
    from towerpack.trainer import DistributedTrainerReplicated

    trainer = DistributedTrainerReplicated(1)  # a parameter-server task serves here, then exits
    rank, size = trainer.task.index, trainer.task.num_workers


class Record(Callback):
    _chief_only = False

    def _write(self, line):
        with open(logdir / f"steps.{rank}", "a") as f:
            f.write(line + "\n")

    def _before_train(self):
        self._write(f"start {self.trainer.starting_epoch} {self.global_step}")

    def _trigger_step(self):
        time.sleep(0.05)
        if rank == 0 and self.global_step >= READY_STEP and not (logdir / "ready").exists():
            (logdir / "ready").write_text(repr(time.time()))

    def _after_train(self):
        self._write(f"end {self.global_step}")


x, y = regression_data()
config = AutoResumeTrainConfig(
    model=Regression64(),
    dataflow=RankSlices(x, y, 2, rank, size),
    callbacks=[ModelSaver(), Record()],
    logdir=str(logdir),
    steps_per_epoch=5,
    max_epoch=3,
)
launch_train_with_config(config, trainer)
