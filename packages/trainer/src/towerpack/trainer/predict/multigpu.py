"""Offline predictors with one prediction tower per device, sharing one set of variables.

``MultiTowerOfflinePredictor`` gives one predictor per tower (to run from several threads);
``DataParallelOfflinePredictor`` runs every tower in one call, each on its own inputs. Without
GPUs, the towers run on logical CPU devices, as the multi-device trainers do.
"""

from __future__ import annotations

from .. import logger
from ..compat import tf, tfv1
from ..devices import ensure_cpu_devices, num_cpu_devices, resolve_devices
from ..model_desc import build_placeholders
from ..tower import TowerFunc
from .base import OnlinePredictor, build_prediction_tower, initialize_session
from .config import PredictConfig

__all__ = ["DataParallelOfflinePredictor", "MultiTowerOfflinePredictor"]


def _build_towers(config: PredictConfig, towers, make_inputs):
    """Tower ``tower<t>`` for every GPU id ``t`` of ``towers``, on its device, the first one
    creating the variables and the others reusing them. Returns the graph, the session and the
    ``(inputs, outputs)`` of every tower."""
    if not isinstance(config, PredictConfig):
        raise TypeError(f"expected a PredictConfig, got {type(config).__name__}")
    towers = list(towers)
    devices = resolve_devices(towers)
    creator = ensure_cpu_devices(config.session_creator, num_cpu_devices(devices))
    graph = config._maybe_create_graph()
    func = TowerFunc(config.tower_func, config.input_signature)
    built = []
    with graph.as_default():
        for k, (tower, device) in enumerate(zip(towers, devices, strict=True)):
            name = f"tower{tower}"
            logger.info("Building predictor tower %s on %s", name, device)
            with tfv1.variable_scope(tfv1.get_variable_scope(), reuse=k > 0), tf.device(device):
                built.append(build_prediction_tower(config, func, name, make_inputs(name)))
        sess = initialize_session(config, creator)
        if config.create_graph:
            graph.finalize()
    return graph, sess, built


class MultiTowerOfflinePredictor(OnlinePredictor):
    """One prediction tower per entry of ``towers`` (GPU ids), all fed by the same placeholders.

    ``predictors`` holds one ``OnlinePredictor`` per tower, sharing one session; calling this
    object runs tower 0.
    """

    def __init__(self, config: PredictConfig, towers):
        placeholders = []

        def shared_inputs(_name):
            if not placeholders:
                placeholders.extend(build_placeholders(config.input_signature))
            return placeholders

        self.graph, sess, built = _build_towers(config, towers, shared_inputs)
        self.predictors = [OnlinePredictor(i, o, config.return_input, sess) for i, o in built]
        super().__init__(*built[0], config.return_input, sess)

    def get_predictors(self) -> list[OnlinePredictor]:
        """One predictor per tower."""
        return list(self.predictors)

    def get_predictor(self, n: int) -> list[OnlinePredictor]:
        """``n`` predictors, spread over the towers round-robin (a warning when ``n`` exceeds
        the number of towers). Note: a list, as in the reference."""
        count = len(self.predictors)
        if n > count:
            logger.warning("n > #towers, will assign predictor to GPU by round robin")
        return [self.predictors[k % count] for k in range(n)]

    def close(self) -> None:
        self.sess.close()


class DataParallelOfflinePredictor(OnlinePredictor):
    """One prediction tower per entry of ``towers`` (GPU ids), each with its own placeholders
    (``tower<t>_<input name>``). A call takes the inputs of tower 0, then those of tower 1, ...,
    and returns the outputs in the same order; nothing is split or merged."""

    def __init__(self, config: PredictConfig, towers):
        def own_inputs(name):
            signature = [tf.TensorSpec(s.shape, s.dtype, f"{name}_{s.name}") for s in config.input_signature]
            return build_placeholders(signature)

        self.graph, sess, built = _build_towers(config, towers, own_inputs)
        inputs = [t for i, _ in built for t in i]
        outputs = [t for _, o in built for t in o]
        super().__init__(inputs, outputs, config.return_input, sess)

    def close(self) -> None:
        self.sess.close()
