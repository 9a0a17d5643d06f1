"""KerasModel: the reference's Keras-style front end, ``KerasModel(...).compile(...).fit(...)``."""

from __future__ import annotations

from ..callbacks.inference import ScalarStats
from ..callbacks.inference_runner import InferenceRunner
from ..compat import tf
from ..interface import apply_default_prefetch
from ..multigpu import SyncMultiGPUTrainerParameterServer
from ..tower_trainer import SingleCostTrainer
from ..trainers import SimpleTrainer
from .training import TOTAL_LOSS_NAME, _as_list, setup_keras_trainer, stat_name

__all__ = ["KerasModel"]


class KerasModel:
    """Train a tf-keras model with a towerpack trainer.

    Args:
        get_model: ``get_model(*input_tensors) -> tf_keras.Model`` (see ``KerasModelCaller``).
        input_signature: ``tf.TensorSpec`` of each model input.
        target_signature: ``tf.TensorSpec`` of each target (one per model output).
        input: a DataFlow or InputSource of ``inputs + targets``; a DataFlow goes through
            ``apply_default_prefetch``.
        trainer: any SingleCostTrainer, including HorovodTrainer and the TF-server trainers;
            default SimpleTrainer with at most one GPU, else
            ``SyncMultiGPUTrainerParameterServer`` over all GPUs.
    """

    def __init__(self, get_model, input_signature=None, target_signature=None, input=None, trainer=None):
        if input_signature is None or target_signature is None:
            raise ValueError(
                "KerasModel needs input_signature= and target_signature= (lists of tf.TensorSpec)"
            )
        if input is None:
            raise ValueError("KerasModel needs input= (a DataFlow or an InputSource of inputs and targets)")
        if trainer is None:
            gpus = len(tf.config.list_physical_devices("GPU"))
            trainer = SimpleTrainer() if gpus <= 1 else SyncMultiGPUTrainerParameterServer(gpus)
        if not isinstance(trainer, SingleCostTrainer):
            raise TypeError(f"KerasModel trains with a SingleCostTrainer, got {type(trainer).__name__}")
        self.get_model = get_model
        self.input_signature = list(input_signature)
        self.target_signature = list(target_signature)
        self.trainer = trainer
        self.input = apply_default_prefetch(input, trainer)
        self._stats: list[str] | None = None

    def compile(self, optimizer, loss, metrics=None) -> KerasModel:
        """Build the training graph.

        Args:
            optimizer: a ``tf.compat.v1.train.Optimizer``.
            loss: a Keras loss (name or function) per output, or one for a single output.
            metrics: Keras metrics (names or functions), the k-th for the k-th output.

        Returns:
            self, so that ``fit`` can follow.
        """
        losses, metrics = _as_list(loss, "loss"), _as_list(metrics, "metric")
        setup_keras_trainer(
            self.trainer,
            self.get_model,
            self.input_signature,
            self.target_signature,
            self.input,
            optimizer,
            losses,
            metrics,
        )
        self._stats = [stat_name(x) for x in losses + metrics] + [TOTAL_LOSS_NAME]
        return self

    def fit(self, validation_data=None, **kwargs) -> None:
        """Train: ``trainer.train_with_defaults(**kwargs)``.

        Args:
            validation_data: a DataFlow or InputSource; an ``InferenceRunner`` then reports the
                losses, metrics and ``total_loss`` over it after every epoch as ``validation_<name>``.
            kwargs: as ``train_with_defaults``; ``steps_per_epoch`` defaults to the input's size.
        """
        if self._stats is None:
            raise RuntimeError("call compile(optimizer, loss, metrics) before fit()")
        callbacks = list(kwargs.pop("callbacks", None) or [])
        if validation_data is not None:
            callbacks.insert(0, InferenceRunner(validation_data, ScalarStats(self._stats)))
        if kwargs.get("steps_per_epoch") is None:
            try:
                kwargs["steps_per_epoch"] = self.input.size()
            except NotImplementedError:
                raise ValueError("fit() needs steps_per_epoch: the input's size is unknown") from None
        self.trainer.train_with_defaults(callbacks=callbacks, **kwargs)
