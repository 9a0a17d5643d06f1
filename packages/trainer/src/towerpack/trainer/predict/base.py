"""Predictors: call a model on numpy inputs, inside a training process or from a checkpoint.

``OnlinePredictor`` runs tensors of an existing graph in a session; ``OfflinePredictor`` builds
the model from a ``PredictConfig`` in a graph and session of its own. ``AsyncPredictorBase`` is
the interface of predictors that queue requests and answer with futures.
"""

from __future__ import annotations

from ..compat import tfv1
from ..cpu_kernels import check_cpu_kernels
from ..model_desc import build_placeholders
from ..tower import PredictTowerContext, TowerFunc
from .config import PredictConfig

__all__ = [
    "AsyncPredictorBase",
    "OfflinePredictor",
    "OnlinePredictor",
    "PredictorBase",
    "build_prediction_tower",
    "initialize_session",
]


class PredictorBase:
    """``predictor(*inputs)`` → list of output arrays, or ``(inputs, outputs)`` if ``return_input``.

    Subclasses implement ``_do_call(inputs)``.
    """

    return_input = False

    def __call__(self, *args):
        output = self._do_call(args)
        return (args, output) if self.return_input else output

    def _do_call(self, args) -> list:
        raise NotImplementedError


class AsyncPredictorBase(PredictorBase):
    """A predictor that takes requests through ``put_task`` and answers with futures; calling it
    waits for the answer."""

    def put_task(self, dp, callback=None):
        """Queue one datapoint ``dp`` (a list of inputs); returns a ``concurrent.futures.Future``
        of its outputs. ``callback(future)`` runs when it is done."""
        raise NotImplementedError

    def start(self) -> None:
        """Start answering requests."""

    def _do_call(self, args):
        return self.put_task(list(args)).result()


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

    def __call__(self, *args):
        # The older form: one list holding every input.
        if len(args) == 1 and isinstance(args[0], (list, tuple)) and len(self.input_tensors) != 1:
            args = tuple(args[0])
        return super().__call__(*args)

    def _do_call(self, args):
        if len(args) != len(self.input_tensors):
            raise TypeError(
                f"predictor takes {len(self.input_tensors)} inputs "
                f"({[t.name for t in self.input_tensors]}), got {len(args)}"
            )
        sess = self.sess or tfv1.get_default_session()
        if sess is None:
            raise RuntimeError("the predictor has no session yet (use it after the trainer's initialize())")
        if self._callable_sess is not sess:
            self._callable = sess.make_callable(self.output_tensors, self.input_tensors)
            self._callable_sess = sess
        return list(self._callable(*args))


def build_prediction_tower(config: PredictConfig, tower_func: TowerFunc, ns_name: str = "", inputs=None):
    """Call ``tower_func`` once under ``PredictTowerContext(ns_name)`` on new placeholders (or
    ``inputs``) in the default graph; returns ``(input tensors, output tensors)`` by the config's
    names."""
    if inputs is None:
        inputs = build_placeholders(config.input_signature)
    with PredictTowerContext(ns_name):
        tower_func(*inputs)
    handle = tower_func.towers[-1]
    return handle.get_tensors(config.input_names), handle.get_tensors(config.output_names)


def initialize_session(config: PredictConfig, session_creator=None):
    """A session from ``session_creator`` (default: the config's), initialized by the config's
    ``session_init`` (both phases)."""
    config.session_init._setup_graph()
    creator = session_creator or config.session_creator
    check_cpu_kernels(tfv1.get_default_graph(), getattr(creator, "config", None), config.output_names)
    sess = creator.create_session()
    config.session_init._run_init(sess)
    return sess


class OfflinePredictor(OnlinePredictor):
    """A predictor in a graph and session of its own, built from a ``PredictConfig``: the tower
    function is called once under ``PredictTowerContext('')`` and the session initialized with
    ``session_init`` (e.g. ``SmartInit(checkpoint)``). A graph it created is finalized."""

    def __init__(self, config: PredictConfig):
        if not isinstance(config, PredictConfig):
            raise TypeError(f"{type(self).__name__} takes a PredictConfig, got {type(config).__name__}")
        self.graph = config._maybe_create_graph()
        with self.graph.as_default():
            inputs, outputs = build_prediction_tower(
                config, TowerFunc(config.tower_func, config.input_signature)
            )
            sess = initialize_session(config)
            if config.create_graph:
                self.graph.finalize()
        super().__init__(inputs, outputs, config.return_input, sess)

    def close(self) -> None:
        self.sess.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
