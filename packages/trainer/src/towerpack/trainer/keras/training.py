"""setup_keras_trainer: train a Keras model with Keras losses and metrics under any SingleCostTrainer.

The tower function it builds feeds the first ``len(input_signature)`` inputs to the model and
compares its outputs with the remaining inputs (the targets), output by output:

- each loss (a Keras loss name or function) is computed in name scope ``keras_loss`` and its mean
  is named after the loss (``categorical_crossentropy``);
- ``total_loss`` is their sum plus ``regularize_cost_from_collection()`` (the Keras layers'
  regularizers);
- each metric is computed in name scope ``keras_metric`` and named after the metric, in the main
  training tower and in inference towers;
- all of them get moving summaries, so they reach the monitors under these names.
"""

from __future__ import annotations

from ..compat import tf, tfv1
from ..models.regularize import regularize_cost_from_collection
from ..summary import add_moving_summary
from ..tower import get_current_tower_context
from ..tower_trainer import SingleCostTrainer
from .caller import KerasModelCaller
from .loader import graph_learning_phase, tf_keras
from .phase import KerasPhaseCallback

__all__ = ["TOTAL_LOSS_NAME", "setup_keras_trainer"]

TOTAL_LOSS_NAME = "total_loss"


def _as_list(value, what: str) -> list:
    if value is None:
        return []
    items = [value] if isinstance(value, str) or callable(value) else list(value)
    for item in items:
        if not (isinstance(item, str) or callable(item)):
            raise TypeError(f"each {what} must be a Keras {what} name or function, got {item!r}")
    return items


def stat_name(item) -> str:
    """The name a loss or metric is reported under: the string given, or the function's name."""
    return item if isinstance(item, str) else getattr(item, "__name__", type(item).__name__)


def _named_mean(value, name: str):
    mean = tf.reduce_mean(value, name=name)
    if mean.op.name.split("/")[-1] != name:
        raise ValueError(
            f"'{mean.op.name}' should be named '{name}': another tensor of the tower has that name, "
            "or the same loss or metric is listed twice"
        )
    return mean


def setup_keras_trainer(
    trainer, get_model, input_signature, target_signature, input, optimizer, loss, metrics=None
) -> None:
    """Build the graph of ``trainer`` for a Keras model (see the module).

    Args:
        trainer: a SingleCostTrainer (SimpleTrainer, a multi-GPU, Horovod or TF-server trainer).
        get_model: ``get_model(*input_tensors) -> tf_keras.Model``, see ``KerasModelCaller``.
        input_signature, target_signature: lists of ``tf.TensorSpec``: the model's inputs and
            the targets, one per output.
        input: the InputSource, giving inputs then targets.
        optimizer: a ``tf.compat.v1.train.Optimizer``.
        loss: one loss per output (name or function); metrics: names or functions, the k-th
            for the k-th output.
    """
    if not isinstance(trainer, SingleCostTrainer):
        raise TypeError(f"setup_keras_trainer needs a SingleCostTrainer, got {type(trainer).__name__}")
    if not isinstance(optimizer, tfv1.train.Optimizer):
        raise TypeError(
            f"optimizer must be a tf.compat.v1.train.Optimizer (e.g. tf.compat.v1.train.AdamOptimizer), "
            f"got {type(optimizer).__name__}; Keras optimizers do not train in graph-mode towers"
        )
    losses = _as_list(loss, "loss")
    if not losses:
        raise ValueError("setup_keras_trainer needs at least one loss")
    metrics = _as_list(metrics, "metric")
    input_signature, target_signature = list(input_signature), list(target_signature)
    loss_fns = [tf_keras.losses.get(x) for x in losses]
    metric_fns = [tf_keras.metrics.get(x) for x in metrics]
    caller = KerasModelCaller(get_model)
    nr_inputs = len(input_signature)

    def get_cost(*tensors):
        ctx = get_current_tower_context()
        inputs, targets = tensors[:nr_inputs], tensors[nr_inputs:]
        outputs = caller(*inputs)
        outputs = outputs if isinstance(outputs, list) else [outputs]
        if not len(outputs) == len(targets) == len(losses):
            raise ValueError(
                f"the Keras model has {len(outputs)} output(s), target_signature {len(targets)} "
                f"target(s) and there are {len(losses)} loss(es): they must be as many"
            )
        loss_tensors = []
        for fn, item, target, output in zip(loss_fns, losses, targets, outputs, strict=True):
            with tfv1.name_scope("keras_loss"):
                value = fn(target, output)
            loss_tensors.append(_named_mean(value, stat_name(item)))
        reg = regularize_cost_from_collection()
        total = tf.add_n([*loss_tensors, tf.cast(reg, loss_tensors[0].dtype)], name=TOTAL_LOSS_NAME)
        add_moving_summary(reg, total, *loss_tensors)
        if len(metrics) > len(outputs):
            raise ValueError(f"{len(metrics)} metrics for a Keras model with {len(outputs)} output(s)")
        if metrics and (ctx.is_main_training_tower or not ctx.is_training):
            values = []
            for fn, item, target, output in zip(metric_fns, metrics, targets, outputs, strict=False):
                with tfv1.name_scope("keras_metric"):
                    value = fn(target, output)
                values.append(_named_mean(value, stat_name(item)))
            add_moving_summary(*values)
        return total

    trainer.setup_graph(input_signature + target_signature, input, get_cost, lambda: optimizer)
    phase = graph_learning_phase()
    if phase is not None and phase.consumers():
        trainer.register_callback(KerasPhaseCallback(True))
