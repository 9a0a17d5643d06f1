"""PredictConfig: what an OfflinePredictor builds and how it initializes its variables."""

from __future__ import annotations

from ..compat import tf, tfv1
from ..model_desc import ModelDescBase
from ..sesscreate import NewSessionCreator
from ..sessinit import SessionInit, SmartInit

__all__ = ["PredictConfig"]


class PredictConfig:
    """Args:
    model: a ModelDesc (its ``build_graph`` and input signature are used), or
    tower_func + input_signature: the same given directly.
    input_names, output_names: tensors fed and fetched, by name (default: all inputs; the
        outputs are required).
    session_init: a SessionInit or anything ``SmartInit`` takes (a checkpoint path, a dict).
    session_creator: defaults to a new session that runs the variable initializers.
    return_input: also return the inputs from each call.
    create_graph: build in a new graph (default) or in the current default graph.
    """

    def __init__(
        self,
        model=None,
        tower_func=None,
        input_signature=None,
        input_names=None,
        output_names=None,
        session_creator=None,
        session_init=None,
        return_input: bool = False,
        create_graph: bool = True,
    ):
        if model is not None:
            if not isinstance(model, ModelDescBase):
                raise TypeError(f"model= must be a ModelDesc, got {type(model).__name__}")
            if tower_func is not None or input_signature is not None:
                raise ValueError("give model= or tower_func= and input_signature=, not both")
            tower_func, input_signature = model.build_graph, model.get_input_signature()
        if tower_func is None or input_signature is None:
            raise ValueError("PredictConfig needs model= or both tower_func= and input_signature=")
        self.tower_func = tower_func
        self.input_signature = list(input_signature)
        for spec in self.input_signature:
            if not isinstance(spec, tf.TensorSpec):
                raise TypeError(f"input_signature takes tf.TensorSpec, got {spec!r}")
        self.input_names = (
            list(input_names) if input_names is not None else [s.name for s in self.input_signature]
        )
        if not output_names:
            raise ValueError("PredictConfig needs output_names")
        self.output_names = list(output_names)
        self.session_init = SmartInit(session_init)
        if not isinstance(self.session_init, SessionInit):
            raise TypeError(f"session_init= must be a SessionInit, got {session_init!r}")
        if session_creator is None:
            session_creator = NewSessionCreator()
        self.session_creator = session_creator
        self.return_input = return_input
        self.create_graph = create_graph

    def _maybe_create_graph(self):
        return tf.Graph() if self.create_graph else tfv1.get_default_graph()
