"""Short SimpleTrainer runs of the tiny classifier, for the callback tests."""

from __future__ import annotations

from support.trainer_models import ArrayBatches, SoftmaxClassifier
from towerpack.trainer import SimpleTrainer, TrainConfig, launch_train_with_config
from towerpack.trainer.callbacks.base import Callback
from towerpack.trainer.compat import tfv1

__all__ = ["RecordLR", "train_classifier"]


def train_classifier(
    callbacks, x, label, steps=4, epochs=3, model=None, data=None, config_cls=TrainConfig, **config
):
    """Train ``model`` (a SoftmaxClassifier by default) on batches of 32 of ``(x, label)``, or on
    the InputSource ``data``, with ``callbacks``; return the trainer."""
    trainer = SimpleTrainer()
    launch_train_with_config(
        config_cls(
            model=model or SoftmaxClassifier(),
            dataflow=None if data is not None else ArrayBatches(x, label, batch_size=32),
            data=data,
            callbacks=list(callbacks),
            steps_per_epoch=steps,
            max_epoch=epochs,
            **config,
        ),
        trainer,
    )
    return trainer


class RecordLR(Callback):
    """The learning rate in effect during each epoch (read when the epoch starts)."""

    def __init__(self):
        self.values = {}

    def _setup_graph(self):
        self.var = next(v for v in tfv1.global_variables() if v.op.name == "learning_rate")

    def _before_epoch(self):
        self.values[self.epoch_num] = round(float(tfv1.get_default_session().run(self.var)), 6)
