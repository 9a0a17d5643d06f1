"""KerasModelCaller: a tf-keras model as (part of) a tower function, in every kind of tower.

Keras ignores variable scopes, so a model cannot be "reused" the way ``get_variable`` models
are. The caller keeps, per graph, the model each tower built:

- the first tower with variables of its own builds it with ``get_model(*inputs)``; its variables
  get the names a single-tower model has (see ``variables.py``);
- a later tower with variables of its own (replicated training, tower k > 0) builds another one,
  whose variables are ``tower{k}/`` copies of tower 0's;
- a tower that reuses variables (inference towers, parameter-server and async towers k > 0)
  calls the first tower's model on its inputs;
- a tower that calls the caller again calls the model it already has.

The training flag comes from the TowerContext: layers build their training or inference
branch for ``ctx.is_training``, not from Keras's learning-phase placeholder. In the main
training tower the model's update ops (BatchNormalization's moving statistics) go to
UPDATE_OPS, which the trainers run with every step; in training towers with variables of their
own its regularization losses go to REGULARIZATION_LOSSES, for
``regularize_cost_from_collection``.
"""

from __future__ import annotations

import dataclasses
import weakref

from .. import logger
from ..compat import tf, tfv1
from ..tower import get_current_tower_context
from .loader import check_keras_model, learning_phase
from .variables import Naming, keras_variables

__all__ = ["KerasModelCaller"]


@dataclasses.dataclass
class _GraphModels:
    """The models a caller built in one graph."""

    variables: list  # the first model's variables, in the order they were created
    first: object  # the first model (reused by towers without variables of their own)
    by_tower: dict = dataclasses.field(default_factory=dict)  # tower name scope -> its model


class KerasModelCaller:
    """Call a tf-keras model in tower functions as if Keras respected variable reuse.

    Args:
        get_model: ``get_model(*input_tensors) -> tf_keras.Model``. It is called once in each
            tower that has variables of its own, and must build a new model each time. The model
            may be built on the given tensors (``keras.Input(tensor=x)``) or on nothing yet
            (then it is called on them).

    Calling the caller with the tower's input tensors returns the model's output: a tensor, or a
    list for a model with several outputs. ``cached_model`` is the model built first.
    """

    def __init__(self, get_model):
        if not callable(get_model):
            raise TypeError(f"get_model must be callable, got {type(get_model).__name__}")
        self.get_model = get_model
        self._graphs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @property
    def cached_model(self):
        """The model built first in the default graph (None before)."""
        built = self._graphs.get(tfv1.get_default_graph())
        return built.first if built is not None else None

    def __call__(self, *inputs):
        # The reference's older form passes the inputs as one list.
        if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
            inputs = tuple(inputs[0])
        ctx = get_current_tower_context()
        if ctx is None:
            raise RuntimeError("KerasModelCaller must be called in a tower function (under a TowerContext)")
        graph = tfv1.get_default_graph()
        built = self._graphs.get(graph)
        ops_before = set(graph.get_operations())
        with learning_phase(ctx.is_training):
            if built is not None and ctx.ns_name in built.by_tower:
                model, own = built.by_tower[ctx.ns_name], False
                outputs = _call(model, inputs, ctx.is_training)
            elif not ctx.has_own_variables:
                if built is None:
                    raise RuntimeError(
                        f"tower '{ctx.ns_name}' reuses variables, but no tower has built the Keras model "
                        "in this graph yet: build a tower with variables of its own first"
                    )
                model, own = built.first, False
                outputs = _call(model, inputs, ctx.is_training)
            else:
                model, outputs, variables = self._build(ctx, built, inputs)
                own = True
                if built is None:
                    built = self._graphs[graph] = _GraphModels(variables, model)
            built.by_tower.setdefault(ctx.ns_name, model)
        new_ops = set(graph.get_operations()) - ops_before
        if own:
            _keep_keras_trainable(model, new_ops)
        if ctx.is_training:
            _collect(model, ctx, own, new_ops)
        return outputs

    def _build(self, ctx, built, inputs):
        """Build a model in a tower with variables of its own; returns (model, outputs, variables)."""
        if built is None:
            naming, source = Naming.KERAS, None
        elif ctx.vs_name:
            naming, source = Naming.REPLICA, built.variables
        else:
            raise ValueError(
                f"tower '{ctx.ns_name}' has variables of its own but no variable scope, and this graph "
                "already has the Keras model: a second copy would need names of its own. Open the "
                "tower under a reusing variable scope, or in a variable scope of its own."
            )
        with keras_variables(ctx.ns_name, naming, source) as created:
            model = self.get_model(*inputs)
            check_keras_model(model, "get_model")
            outputs = _outputs_on(model, inputs, ctx.is_training)
        if naming is Naming.REPLICA:
            if any(model is m for m in built.by_tower.values()):
                raise ValueError(
                    f"get_model returned the Keras model of another tower in tower '{ctx.ns_name}', "
                    "which needs a copy of its own (replicated training): get_model must build a new "
                    "model every time it is called (do not cache it)"
                )
            if len(created) != len(source):
                raise ValueError(
                    f"tower '{ctx.ns_name}' built a Keras model with {len(created)} variables, tower 0's "
                    f"has {len(source)}: get_model must build the same model in every tower"
                )
        return model, outputs, created


def _call(model, inputs, training: bool):
    out = model(list(inputs) if len(inputs) > 1 else inputs[0], training=training)
    return list(out) if isinstance(out, (list, tuple)) else out


def _outputs_on(model, inputs, training: bool):
    """The model's outputs for ``inputs``: those it was built on, or a call on them."""
    built_on = getattr(model, "inputs", None) or []
    if len(built_on) == len(inputs) and all(a is b for a, b in zip(built_on, inputs, strict=True)):
        outs = list(model.outputs)
        return outs[0] if len(outs) == 1 else outs
    return _call(model, inputs, training)


def _keep_keras_trainable(model, new_ops: set) -> None:
    """Variables of this build that Keras does not train (layers with ``trainable=False``) leave
    TRAINABLE_VARIABLES, so that no trainer computes gradients for them."""
    frozen = {id(v) for v in model.non_trainable_weights if v.op in new_ops}
    if not frozen:
        return
    ref = tfv1.get_collection_ref(tfv1.GraphKeys.TRAINABLE_VARIABLES)
    dropped = [v.op.name for v in ref if id(v) in frozen]
    ref[:] = [v for v in ref if id(v) not in frozen]
    if dropped:
        logger.info("Keras does not train %d variable(s), nor do the trainers: %s", len(dropped), dropped)


def _collect(model, ctx, own: bool, new_ops: set) -> None:
    """Put this call's update ops (main training tower) and regularization losses (towers with
    variables of their own) into their collections."""
    if ctx.is_main_training_tower:
        for update in model.updates:
            op = update if isinstance(update, tf.Operation) else update.op
            if op in new_ops:
                tfv1.add_to_collection(tfv1.GraphKeys.UPDATE_OPS, op)
    if own:
        for loss in model.losses:
            tfv1.add_to_collection(tfv1.GraphKeys.REGULARIZATION_LOSSES, loss)
