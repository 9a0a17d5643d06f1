"""Rank script: train the tests' tf-keras model with KerasModel under a multi-process trainer and
save every variable before and after training, per rank.

Usage: keras_train.py OUTDIR horovod|tf-server-replicated|tf-server-ps
Each rank builds its model from a different seed: rank 0's (chief's) values must win.
Parameter-server tasks of tf-server serve from the trainer's constructor and exit when done.
"""

import functools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # tests/, for support.*

from support.dist_models import RankSlices
from support.keras_models import INPUT_SIGNATURE, TARGET_SIGNATURE, get_model, keras_data
from towerpack.trainer import (
    Callback,
    DistributedTrainerParameterServer,
    DistributedTrainerReplicated,
    HorovodTrainer,
)
from towerpack.trainer.compat import tfv1
from towerpack.trainer.keras import KerasModel

BATCH = 16


class SaveVariables(Callback):
    """Every variable's value before and after training: ``before.<rank>.npz``, ``after.<rank>.npz``."""

    _chief_only = False

    def __init__(self, out, rank):
        self.out, self.rank = Path(out), rank

    def _save(self, which):
        variables = tfv1.global_variables() + tfv1.local_variables()
        values = self.trainer.sess.run(variables)
        names = [v.op.name.replace("/", "__") for v in variables]
        np.savez(self.out / f"{which}.{self.rank}.npz", **dict(zip(names, values, strict=True)))

    def _before_train(self):
        self._save("before")

    def _after_train(self):
        self._save("after")


def main():
    out, kind = sys.argv[1], sys.argv[2]
    if kind == "horovod":
        trainer = HorovodTrainer()
        rank, size = trainer.rank, trainer.size
    else:
        cls = (
            DistributedTrainerReplicated
            if kind == "tf-server-replicated"
            else DistributedTrainerParameterServer
        )
        trainer = cls(1)  # a parameter-server task exits here
        rank, size = trainer.task.index, trainer.task.num_workers
    x, y = keras_data()
    data = RankSlices(x, y, BATCH, rank, size)
    model = KerasModel(
        functools.partial(get_model, seed=1 + rank),
        INPUT_SIGNATURE,
        TARGET_SIGNATURE,
        input=data,
        trainer=trainer,
    )
    model.compile(tfv1.train.AdamOptimizer(0.02), "categorical_crossentropy", "categorical_accuracy")
    vx, vy = keras_data(32, seed=7)
    model.fit(
        validation_data=RankSlices(vx, vy, 16),
        callbacks=[SaveVariables(out, rank)],
        monitors=[],
        steps_per_epoch=len(data),
        max_epoch=2,
    )


if __name__ == "__main__":
    main()
