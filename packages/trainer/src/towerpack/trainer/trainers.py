"""The single-device trainers, and the older trainer names kept as thin adapters."""

from __future__ import annotations

from towerpack.utils.placement import placement

from . import logger
from .base import DataFlowInput, Trainer
from .input_source.base import FeedfreeInput, InputSource
from .input_source.queue import QueueInput
from .tower import TowerFunc, TrainTowerContext, get_current_tower_context
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

    default_input = DataFlowInput.FEED

    def _setup_graph(self, input, get_cost_fn, get_opt_fn):
        where = placement()
        if where.world_size > 1:
            logger.warning(
                "%s in rank %d of a job of %d processes: each process trains its own copy of the model, "
                "unsynchronized, and only rank 0 saves it; for data-parallel training use HorovodTrainer, "
                "CollectiveAllReduceTrainer or towerpack.trainer.default_trainer()",
                type(self).__name__,
                where.rank,
                where.world_size,
            )
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


def _feedfree_input(trainer, config, kind: type = FeedfreeInput, queue=None) -> InputSource:
    """The input an older feed-free trainer reads: ``config.data``, or ``config.dataflow`` through a
    QueueInput. The config is left as it is."""
    name = type(trainer).__name__
    if config.data is None:
        if config.dataflow is None:
            raise ValueError(f"{name} needs TrainConfig(dataflow=...) or TrainConfig(data=...)")
        return QueueInput(config.dataflow, queue)
    if not isinstance(config.data, kind):
        why = "" if isinstance(config.data, FeedfreeInput) else " (it feeds through feed_dict)"
        raise TypeError(f"{name} needs a {kind.__name__}, got {type(config.data).__name__}{why}")
    return config.data


class QueueInputTrainer(SimpleTrainer):
    """SimpleTrainer reading through a ``QueueInput`` (older name; ``input_queue`` is its TF queue)."""

    default_input = DataFlowInput.QUEUE

    def __init__(self, config=None, input_queue=None):
        super().__init__(config)
        self._input_queue = input_queue
        if config is not None:
            self._input_from_config(config)  # a wrong input fails here, as it did in the older API

    def _input_from_config(self, config) -> InputSource:
        return _feedfree_input(self, config, QueueInput, self._input_queue)


class SimpleFeedfreeTrainer(SimpleTrainer):
    """Older name: SimpleTrainer on a FeedfreeInput (a DataFlow goes through a QueueInput)."""

    default_input = DataFlowInput.QUEUE

    def __init__(self, config=None):
        super().__init__(config)
        if config is not None:
            self._input_from_config(config)

    def _input_from_config(self, config) -> InputSource:
        return _feedfree_input(self, config)


class FeedfreeTrainerBase(TowerTrainer):
    """Older base class of trainers that read a FeedfreeInput; each step runs ``train_op``.

    The older way to write a trainer: ``MyTrainer(config).train()``, where ``MyTrainer`` builds
    its graph in ``_setup()``. ``super()._setup()`` sets up ``self.input_source``
    (``config.data``, or ``config.dataflow`` through a QueueInput) for ``self.model`` and
    registers its callbacks; ``build_train_tower()`` builds the model on the input's tensors and
    returns the cost; ``_setup()`` then sets ``train_op`` (or the class overrides ``run_step``).
    ``launch_train_with_config(config, MyTrainer())`` works as well. New code subclasses
    ``TowerTrainer``, or ``SingleCostTrainer`` to minimize one cost.
    """

    def __init__(self, config=None):
        super().__init__(config)
        self.model = None
        self.input_source = None
        if config is not None:
            self._use_config(config)

    def _use_config(self, config) -> None:
        self.model = config.model
        self.input_source = _feedfree_input(self, config)

    def _setup(self) -> None:
        """Set up the input source for the model and register its callbacks; subclasses then
        build the graph."""
        if self.model is None:
            raise ValueError(f"{type(self).__name__} needs TrainConfig(model=...)")
        if self.measure_input_wait:
            self.input_source.measure_wait()
        self.register_callback(self.input_source.setup(self.model.get_input_signature()))

    def build_train_tower(self):
        """Build the model on the input's tensors in the current training tower (a new main
        tower when there is none); returns the cost."""
        if self._tower_func is None:
            self.tower_func = TowerFunc(self.model.build_graph, self.model.get_input_signature())
        if get_current_tower_context() is not None:
            return self.tower_func(*self.input_source.get_input_tensors())
        with TrainTowerContext(""):
            return self.tower_func(*self.input_source.get_input_tensors())

    def _setup_graph_from_config(self, config) -> None:
        if config is not self.config:
            self._use_config(config)
        self._setup()
        if self.train_op is None and type(self).run_step is Trainer.run_step:
            name = type(self).__name__
            raise NotImplementedError(
                f"{name} did not set train_op: it is an older abstract base; subclass it, build "
                f"the graph in _setup() and set train_op there, or train the model with "
                f"launch_train_with_config(config, SimpleTrainer())"
            )


class SingleCostFeedfreeTrainer(FeedfreeTrainerBase):
    """Older base class of feed-free trainers that minimize the model's single cost.

    A subclass's ``_setup()`` calls ``super()._setup()``, then ``cost, grads =
    self._get_cost_and_grad()`` and sets ``train_op`` from the gradients.
    """

    def _get_cost_and_grad(self):
        """Build the training tower; returns its cost and the ``(gradient, variable)`` pairs of the
        model's optimizer."""
        cost = self.build_train_tower()
        grads = self.model.get_optimizer().compute_gradients(
            cost, gate_gradients=False, colocate_gradients_with_ops=True
        )
        return cost, [(g, v) for g, v in grads if g is not None]
