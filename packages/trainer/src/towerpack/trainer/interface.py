"""launch_train_with_config: train a TrainConfig with a trainer."""

from __future__ import annotations

from . import logger
from .base import NewSessionCreator, Trainer
from .compat import tfv1
from .input_source.base import InputSource

__all__ = ["apply_default_prefetch", "launch_train_with_config"]


def apply_default_prefetch(input_source_or_dataflow, trainer: Trainer) -> InputSource:
    """The InputSource a trainer uses for a DataFlow: ``FeedInput`` for SimpleTrainer, ``QueueInput``
    otherwise; a QueueInput feeding several GPUs is wrapped in a ``StagingInput`` (unless the
    trainer has ``gpu_prefetch=False``)."""
    from . import input_source as inputs

    source = input_source_or_dataflow
    if not isinstance(source, InputSource):
        if getattr(trainer, "_default_input", "queue") == "feed":
            source = inputs.FeedInput(source)
        else:
            source = inputs.QueueInput(source)
    devices = getattr(trainer, "devices", None) or []
    gpus = [d for d in devices if "gpu" in d.lower()]
    prefetch = getattr(trainer, "gpu_prefetch", True)
    if len(gpus) > 1 and prefetch and isinstance(source, inputs.QueueInput):
        source = inputs.StagingInput(source)
    return source


def launch_train_with_config(config, trainer: Trainer) -> None:
    """Build the config's model with the trainer and train it.

    Sets the log directory if the config names one (chief only), lets the trainer build its
    graph from the config (a SingleCostTrainer turns the dataflow into an InputSource with
    ``apply_default_prefetch`` and calls ``trainer.setup_graph(...)`` with the model), then
    calls ``trainer.train_with_defaults(...)`` with the rest of the config.
    """
    from .config import TrainConfig

    if not isinstance(config, TrainConfig):
        raise TypeError(f"launch_train_with_config takes a TrainConfig, got {type(config).__name__}")
    if not isinstance(trainer, Trainer):
        raise TypeError(f"launch_train_with_config takes a Trainer, got {type(trainer).__name__}")
    if config.logdir is not None and trainer.is_chief:
        from .logger import get_logger_dir, set_logger_dir

        if get_logger_dir() != config.logdir:
            set_logger_dir(config.logdir, action=config.logdir_action)

    trainer._setup_graph_from_config(config)
    _warn_unused_regularization()

    session_creator = config.session_creator
    if session_creator is None:
        session_creator = NewSessionCreator(config=config.session_config)
    trainer.train_with_defaults(
        callbacks=config.callbacks,
        extra_callbacks=config.extra_callbacks,
        monitors=config.monitors,
        session_creator=session_creator,
        session_init=config.session_init,
        steps_per_epoch=config.steps_per_epoch,
        starting_epoch=config.starting_epoch,
        max_epoch=config.max_epoch,
    )


def _warn_unused_regularization() -> None:
    losses = tfv1.get_collection(tfv1.GraphKeys.REGULARIZATION_LOSSES)
    if not losses:
        return
    consumers = {op for t in losses for op in t.consumers()}
    if not consumers:
        logger.warning(
            "%d regularization loss(es) are in REGULARIZATION_LOSSES but the cost does not use them; "
            "add tf.compat.v1.losses.get_regularization_loss() to the cost",
            len(losses),
        )
