"""FeedfreePredictor: a prediction tower that reads its inputs from an InputSource (a queue, a
``tf.data`` dataset) instead of a feed_dict; each call runs one batch."""

from __future__ import annotations

from ..callbacks.group import Callbacks
from ..hooked_session import HookedSession
from ..input_source.base import InputSource
from ..tower import PredictTowerContext, TowerFunc
from .base import PredictorBase, initialize_session
from .config import PredictConfig

__all__ = ["FeedfreePredictor"]


class FeedfreePredictor(PredictorBase):
    """Build the tower function once under ``PredictTowerContext('')`` on ``input_source`` in a
    graph of its own and start the source (e.g. ``QueueInput``'s thread). ``predictor()`` (no
    arguments) runs one batch and returns the outputs; when a finite source is exhausted it raises
    ``tf.errors.OutOfRangeError``. ``close()`` stops the source and the session.

    ``config.return_input`` must be False (the inputs never reach Python).
    """

    def __init__(self, config: PredictConfig, input_source: InputSource):
        if not isinstance(config, PredictConfig):
            raise TypeError(f"FeedfreePredictor takes a PredictConfig, got {type(config).__name__}")
        if not isinstance(input_source, InputSource):
            raise TypeError(f"FeedfreePredictor takes an InputSource, got {type(input_source).__name__}")
        if config.return_input:
            raise ValueError("FeedfreePredictor does not support return_input=True")
        self.config = config
        self.input_source = input_source
        self.sess = None
        self.monitors = None
        self.graph = config._maybe_create_graph()
        with self.graph.as_default():
            signature = config.input_signature
            setup = (
                input_source.get_callbacks() if input_source.setup_done() else input_source.setup(signature)
            )
            self._callbacks = Callbacks(list(setup))
            self.tower_func = func = TowerFunc(config.tower_func, signature)
            with PredictTowerContext(""):
                func(*input_source.get_input_tensors())
            self.output_tensors = func.towers[-1].get_tensors(config.output_names)
            # The source's callbacks see this predictor as their trainer (``.sess``, ``.monitors``,
            # ``.tower_func``).
            self._callbacks.setup_graph(self)
            self.sess = initialize_session(config)
            if config.create_graph:
                self.graph.finalize()
            self._hooked_sess = HookedSession(self.sess, self._callbacks.get_hooks())
        self._callbacks.before_train()

    def __call__(self):
        return self._hooked_sess.run(self.output_tensors)

    def close(self) -> None:
        self._callbacks.after_train()
        self.sess.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
