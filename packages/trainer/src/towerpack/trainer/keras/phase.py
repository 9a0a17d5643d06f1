"""KerasPhaseCallback: feed Keras's learning-phase placeholder in the training steps.

Models called through ``KerasModelCaller`` (and so ``KerasModel`` and ``setup_keras_trainer``)
do not need it: their towers fix the training flag in the graph from the TowerContext. It
serves Keras models called directly in a tower function without ``training=``, whose layers
then read the placeholder (False unless fed): with ``KerasPhaseCallback(True)`` the training
steps run them in training mode. Inference runners and predictors run outside the training
hooks, so they see the default, inference mode, without a hook of their own.
"""

from __future__ import annotations

from .. import logger
from ..callback import Callback
from ..compat import tfv1
from .loader import graph_learning_phase

__all__ = ["KerasPhaseCallback"]


class KerasPhaseCallback(Callback):
    """Feed ``isTrain`` to Keras's learning phase with every training step (on every rank)."""

    _chief_only = False

    def __init__(self, isTrain: bool):
        if not isinstance(isTrain, bool):
            raise TypeError(f"isTrain must be a bool, got {isTrain!r}")
        self._is_train = isTrain

    def _setup_graph(self) -> None:
        self._phase = graph_learning_phase()
        if self._phase is None:
            self._args = None
            logger.info("Keras's learning phase is fixed in this graph; KerasPhaseCallback feeds nothing")
            return
        logger.info("Feeding Keras learning phase %s = %s", self._phase.name, self._is_train)
        self._args = tfv1.train.SessionRunArgs(fetches=[], feed_dict={self._phase: self._is_train})

    def _before_run(self, ctx):
        return self._args
