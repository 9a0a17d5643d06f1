"""The single-device trainers, and the older trainer names kept as thin adapters."""

from __future__ import annotations

from . import logger
from .input_source.base import FeedfreeInput
from .tower import TrainTowerContext
from .tower_trainer import SingleCostTrainer, TowerTrainer

__all__ = [
    "FeedfreeTrainerBase",
    "NoOpTrainer",
    "QueueInputTrainer",
    "SimpleFeedfreeTrainer",
    "SimpleTrainer",
    "SingleCostFeedfreeTrainer",
]


class SimpleTrainer(SingleCostTrainer):
    """One training tower on the default device; a DataFlow is fed through ``FeedInput``."""

    _default_input = "feed"

    def _setup_graph(self, input, get_cost_fn, get_opt_fn):
        logger.info("Building the graph of one training tower ...")
        with TrainTowerContext(""):
            grads = self._make_get_grad_fn(input, get_cost_fn, get_opt_fn)()
            self.train_op = get_opt_fn().apply_gradients(grads, name="train_op")
        return []


class NoOpTrainer(SimpleTrainer):
    """Builds the graph like SimpleTrainer but trains nothing: each step is an empty hooked run,
    so only the callbacks do work (and the global step still advances)."""

    def run_step(self):
        self.hooked_sess.run([])


def _queue_input(dataflow, queue=None):
    from .input_source import QueueInput

    return QueueInput(dataflow, queue) if queue is not None else QueueInput(dataflow)


def _use_feedfree_input(config, queue=None) -> None:
    """Older trainers took a config whose dataflow they fed through a queue."""
    if config is None:
        return
    if config.data is None and config.dataflow is not None:
        config.data, config.dataflow = _queue_input(config.dataflow, queue), None
    if config.data is not None and not isinstance(config.data, FeedfreeInput):
        raise TypeError(
            f"{type(config.data).__name__} feeds through feed_dict; this trainer needs a FeedfreeInput"
        )


class QueueInputTrainer(SimpleTrainer):
    """SimpleTrainer reading through a ``QueueInput`` (older name; ``input_queue`` is its TF queue)."""

    _default_input = "queue"

    def __init__(self, config=None, input_queue=None):
        super().__init__(config)
        if config is not None:
            if config.data is None and config.dataflow is None:
                raise ValueError("QueueInputTrainer needs TrainConfig(dataflow=...)")
            _use_feedfree_input(config, input_queue)
            if type(config.data).__name__ != "QueueInput":
                raise TypeError(f"QueueInputTrainer needs a QueueInput, got {type(config.data).__name__}")


class SimpleFeedfreeTrainer(SimpleTrainer):
    """Older name: SimpleTrainer on a FeedfreeInput (a DataFlow goes through a QueueInput)."""

    _default_input = "queue"

    def __init__(self, config=None):
        super().__init__(config)
        _use_feedfree_input(config)


class FeedfreeTrainerBase(TowerTrainer):
    """Older base class of trainers that read a FeedfreeInput; each step runs ``train_op``."""

    _default_input = "queue"

    def __init__(self, config=None):
        super().__init__(config)
        _use_feedfree_input(config)


class SingleCostFeedfreeTrainer(SingleCostTrainer):
    """Older base class of single-cost trainers that read a FeedfreeInput."""

    _default_input = "queue"

    def __init__(self, config=None):
        super().__init__(config)
        _use_feedfree_input(config)
