"""launch_train_with_config: train a TrainConfig with a trainer; apply_default_prefetch: its input."""

from __future__ import annotations

from .base import DataFlowInput, Trainer
from .config import TrainConfig
from .input_source.base import InputSource
from .input_source.feed import FeedInput
from .input_source.queue import QueueInput
from .input_source.staging import StagingInput

__all__ = ["apply_default_prefetch", "launch_train_with_config"]


def apply_default_prefetch(input_source_or_dataflow, trainer: Trainer) -> InputSource:
    """The InputSource a trainer uses for a DataFlow: ``FeedInput`` or ``QueueInput`` as the trainer's
    ``default_input`` says; a QueueInput feeding several GPUs is wrapped in a ``StagingInput`` (unless
    the trainer has ``gpu_prefetch=False``)."""
    source = input_source_or_dataflow
    if not isinstance(source, InputSource):
        feed = trainer.default_input is DataFlowInput.FEED
        source = FeedInput(source) if feed else QueueInput(source)
    gpus = [d for d in trainer.devices if "gpu" in d.lower()]
    if len(gpus) > 1 and trainer.gpu_prefetch and isinstance(source, QueueInput):
        source = StagingInput(source)
    return source


def launch_train_with_config(config: TrainConfig, trainer: Trainer) -> None:
    """Build the config's model with the trainer and train it (``Trainer.train_with_config`` says how)."""
    if not isinstance(config, TrainConfig):
        raise TypeError(f"launch_train_with_config takes a TrainConfig, got {type(config).__name__}")
    if not isinstance(trainer, Trainer):
        raise TypeError(f"launch_train_with_config takes a Trainer, got {type(trainer).__name__}")
    trainer.train_with_config(config)
