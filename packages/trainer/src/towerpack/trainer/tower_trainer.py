"""TowerTrainer (a trainer built from a tower function) and SingleCostTrainer (minimizes one cost)."""

from __future__ import annotations

from . import logger
from .base import Trainer, _once
from .compat import tf, tfv1
from .input_source.base import InputSource
from .interface import apply_default_prefetch
from .model_desc import build_placeholders
from .predict.base import OnlinePredictor
from .tower import PredictTowerContext, TowerFunc, get_current_tower_context

__all__ = ["SingleCostTrainer", "TowerTrainer"]


class TowerTrainer(Trainer):
    """A trainer whose graph is built by a ``TowerFunc``; it can build predictors from it."""

    _tower_func: TowerFunc | None = None

    def __init__(self, config=None):
        super().__init__(config)
        self._predictors: list = []

    @property
    def tower_func(self) -> TowerFunc:
        if self._tower_func is None:
            raise RuntimeError(f"{type(self).__name__} has no tower function yet; call setup_graph() first")
        return self._tower_func

    @tower_func.setter
    def tower_func(self, func) -> None:
        if not isinstance(func, TowerFunc):
            raise TypeError(f"tower_func must be a TowerFunc, got {type(func).__name__}")
        self._tower_func = func

    @property
    def input_signature(self) -> list:
        return self.tower_func.input_signature

    @property
    def towers(self):
        """Handles of every tower built so far (training and prediction)."""
        return self.tower_func.towers

    @property
    def vs_name_for_predictor(self) -> str:
        """The variable scope a predictor is built in: that of the (first) training tower."""
        return self.training_vs_name(0)

    def training_vs_name(self, device: int = 0) -> str:
        """The variable scope of the training tower on ``device`` (the first one's for another device)."""
        train = self.towers.training()
        if len(train) == 0:
            raise RuntimeError("no training tower was built; predictors reuse its variables")
        return train[device].vs_name if 0 <= device < len(train) else train[0].vs_name

    def get_predictor(self, input_names, output_names, device: int = 0, tower: int | None = None):
        """An ``OnlinePredictor`` on a prediction tower ``tower-pred-<device>`` (``tower-pred-cpu``
        for device -1) that reuses the training variables; its session is the trainer's.

        Build predictors before training starts (the graph is finalized then); use them after
        ``initialize``. ``tower=k`` is the older form: the k-th device of the TrainConfig's
        ``predict_tower`` (of a trainer constructed with a config; else device k).
        """
        if tower is not None:
            device = self._predict_tower_device(int(tower))
        device = int(device)
        name = "tower-pred-cpu" if device < 0 else f"tower-pred-{device}"
        try:
            handle = self.towers[name]
        except KeyError:
            handle = self._build_predict_tower(name, device)
        predictor = OnlinePredictor(
            handle.get_tensors(input_names), handle.get_tensors(output_names), sess=self.sess
        )
        self._predictors.append(predictor)
        return predictor

    def _predict_tower_device(self, k: int) -> int:
        if self.config is None:
            return k
        towers = self.config.predict_tower
        if not 0 <= k < len(towers):
            raise IndexError(f"tower={k}: TrainConfig(predict_tower={towers}) has {len(towers)} tower(s)")
        return towers[k]

    def _build_predict_tower(self, name: str, device: int):
        graph = tfv1.get_default_graph()
        if graph.finalized:
            raise RuntimeError(
                f"predictor tower {name} must be built before training starts "
                "(call get_predictor before train())"
            )
        if get_current_tower_context() is not None:
            raise RuntimeError("get_predictor cannot be called inside a tower")
        device_name = self._predict_device_name(device)
        logger.info("Building predictor tower %s on %s", name, device_name)
        vs_name = self.training_vs_name(device)
        with (
            tfv1.variable_scope(tfv1.get_variable_scope(), reuse=True),
            tfv1.device(device_name),
            PredictTowerContext(name, vs_name=vs_name),
        ):
            placeholders = build_placeholders(self.input_signature)
            self.tower_func(*placeholders)
        return self.towers[name]

    def _predict_device_name(self, device: int) -> str:
        """Where the predictor for ``device`` runs: GPU ``device`` where it exists; without GPUs, the
        logical CPU device of training tower ``device`` (``/cpu:k``, see devices.py); else the CPU."""
        if device < 0:
            return "/cpu:0"
        gpus = len(tf.config.list_physical_devices("GPU"))
        if gpus:
            return f"/gpu:{device}" if device < gpus else "/cpu:0"
        return self.devices[device] if device < len(self.devices) else "/cpu:0"

    def get_predictors(self, input_names, output_names, n: int) -> list:
        """``n`` predictors, spread round-robin over the GPUs (all on the CPU tower without GPUs)."""
        nr_gpu = len(tf.config.list_physical_devices("GPU"))
        return [self.get_predictor(input_names, output_names, k % nr_gpu if nr_gpu else -1) for k in range(n)]

    def _after_session_creation(self) -> None:
        super()._after_session_creation()
        for p in self._predictors:
            p.sess = self.sess


class SingleCostTrainer(TowerTrainer):
    """Base class of trainers that minimize one scalar cost with one optimizer.

    Subclasses implement ``_setup_graph(input, get_cost_fn, get_opt_fn)``, which builds the
    towers (with ``_make_get_grad_fn``), sets ``train_op`` and returns extra callbacks.
    """

    COLOCATE_GRADIENTS_WITH_OPS = True
    GATE_GRADIENTS = False
    AGGREGATION_METHOD = None

    @_once
    def setup_graph(self, input_signature, input, get_cost_fn, get_opt_fn) -> None:
        """Build the training graph.

        Args:
            input_signature: list of ``tf.TensorSpec``, the tower function's inputs.
            input: the InputSource.
            get_cost_fn: the tower function: input tensors → scalar cost.
            get_opt_fn: returns the optimizer (called once; the result is reused).
        """
        if not isinstance(input, InputSource):
            raise TypeError(f"input must be an InputSource, got {type(input).__name__}")
        input_signature = list(input_signature)
        self.tower_func = TowerFunc(get_cost_fn, input_signature)
        self.input_source = input
        opt_box = []

        def get_opt():
            if not opt_box:
                opt = get_opt_fn()
                if not isinstance(opt, tfv1.train.Optimizer):
                    raise TypeError(
                        f"the optimizer must be a tf.compat.v1.train.Optimizer, got {type(opt).__name__}"
                    )
                opt_box.append(opt)
            return opt_box[0]

        if not input.setup_done() and self.measure_input_wait:
            input.measure_wait()
        input_callbacks = input.get_callbacks() if input.setup_done() else input.setup(input_signature)
        train_callbacks = self._setup_graph(input, self.tower_func, get_opt)
        self.register_callback(list(input_callbacks) + list(train_callbacks or []))

    def _setup_graph(self, input, get_cost_fn, get_opt_fn) -> list:
        raise NotImplementedError(f"{type(self).__name__} must implement _setup_graph()")

    def _setup_graph_from_config(self, config) -> None:
        if config.model is None:
            raise ValueError(f"{type(self).__name__} needs TrainConfig(model=...)")
        model = config.model
        source = self._input_from_config(config)
        self.setup_graph(model.get_input_signature(), source, model.build_graph, model.get_optimizer)

    def _input_from_config(self, config) -> InputSource:
        """The InputSource to train on: the config's, or its DataFlow through ``apply_default_prefetch``."""
        source = config.data if config.data is not None else config.dataflow
        if source is None:
            raise ValueError("TrainConfig needs dataflow= or data= to train a model")
        return apply_default_prefetch(source, self)

    def _make_get_grad_fn(self, input, get_cost_fn, get_opt_fn):
        """A function that, under a TowerContext, builds one tower and returns its ``(grad, var)``
        list (None for a non-training tower)."""

        def get_grad_fn():
            ctx = get_current_tower_context()
            if ctx is None:
                raise RuntimeError("the gradient function must be called under a TowerContext")
            cost = get_cost_fn(*input.get_input_tensors())
            if not isinstance(cost, tf.Tensor) or cost.shape.ndims != 0:
                raise ValueError(f"the tower function must return a scalar cost tensor, got {cost!r}")
            if not ctx.is_training:
                return None
            if ctx.has_own_variables:
                varlist = ctx.get_collection_in_tower(tfv1.GraphKeys.TRAINABLE_VARIABLES)
            else:
                varlist = tfv1.trainable_variables()
            opt = get_opt_fn()
            grads = opt.compute_gradients(
                cost,
                var_list=varlist,
                gate_gradients=self.GATE_GRADIENTS,
                colocate_gradients_with_ops=self.COLOCATE_GRADIENTS_WITH_OPS,
                aggregation_method=self.AGGREGATION_METHOD,
            )
            grads = [(g, v) for g, v in grads if g is not None]
            if not grads:
                raise ValueError("the cost does not depend on any trainable variable")
            return grads

        return get_grad_fn
