"""Predictors: call a model on numpy inputs, inside a training process or from a checkpoint."""

from __future__ import annotations

from ..compat import tfv1
from ..model_desc import build_placeholders
from ..tower import PredictTowerContext, TowerFunc
from .config import PredictConfig

__all__ = ["OfflinePredictor", "OnlinePredictor", "PredictorBase"]


class PredictorBase:
    """``predictor(*inputs)`` → list of output arrays (inputs first if ``return_input``)."""

    return_input = False

    def __call__(self, *args):
        if len(args) == 1 and isinstance(args[0], (list, tuple)) and len(self.input_tensors) != 1:
            args = tuple(args[0])
        if len(args) != len(self.input_tensors):
            raise TypeError(
                f"predictor takes {len(self.input_tensors)} inputs "
                f"({[t.name for t in self.input_tensors]}), got {len(args)}"
            )
        output = self._do_call(args)
        return [*args, *output] if self.return_input else output

    def _do_call(self, args) -> list:
        raise NotImplementedError


class OnlinePredictor(PredictorBase):
    """Runs ``output_tensors`` given ``input_tensors`` in a session (by default the one set later,
    e.g. by the trainer once its session exists, or the default session)."""

    def __init__(self, input_tensors, output_tensors, return_input: bool = False, sess=None):
        self.input_tensors = list(input_tensors)
        self.output_tensors = list(output_tensors)
        self.return_input = return_input
        self.sess = sess
        self._callable = None
        self._callable_sess = None

    def _do_call(self, args):
        sess = self.sess or tfv1.get_default_session()
        if sess is None:
            raise RuntimeError("the predictor has no session yet (use it after the trainer's initialize())")
        if self._callable_sess is not sess:
            self._callable = sess.make_callable(self.output_tensors, self.input_tensors)
            self._callable_sess = sess
        return list(self._callable(*args))


class OfflinePredictor(OnlinePredictor):
    """A predictor in a graph and session of its own, built from a ``PredictConfig``: the tower
    function is called once under ``PredictTowerContext('')`` and the session initialized with
    ``session_init`` (e.g. ``SmartInit(checkpoint)``)."""

    def __init__(self, config: PredictConfig):
        if not isinstance(config, PredictConfig):
            raise TypeError(f"OfflinePredictor takes a PredictConfig, got {type(config).__name__}")
        self.graph = config._maybe_create_graph()
        with self.graph.as_default():
            func = TowerFunc(config.tower_func, config.input_signature)
            placeholders = build_placeholders(config.input_signature)
            with PredictTowerContext(""):
                func(*placeholders)
            handle = func.towers[0]
            inputs = handle.get_tensors(config.input_names)
            outputs = handle.get_tensors(config.output_names)
            config.session_init._setup_graph()
            sess = config.session_creator.create_session()
            config.session_init._run_init(sess)
            self.graph.finalize()
        super().__init__(inputs, outputs, config.return_input, sess)

    def close(self) -> None:
        self.sess.close()
