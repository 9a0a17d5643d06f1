"""DataParallelInferenceRunner: validate with one prediction tower per device, in one process."""

from __future__ import annotations

import logging

from ..compat import tf, tfv1
from ..devices import resolve_devices
from ..input_source.queue import QueueInput
from ..tower import PredictTowerContext
from .inference_runner import InferenceRunnerBase, _is_dataflow

logger = logging.getLogger("towerpack.trainer.callbacks")

__all__ = ["DataParallelInferenceRunner"]


class DataParallelInferenceRunner(InferenceRunnerBase):
    """An InferenceRunner with one tower per device: each run evaluates one batch on every tower.

    ``gpus`` is a count N (GPUs 0..N-1) or a list of GPU ids; without GPUs the towers go on
    logical CPU devices, as multi-device trainers' do. ``input`` is a QueueInput (a DataFlow is
    wrapped in one) whose size is known: a pass runs ``size // N`` parallel runs, each taking
    N batches, then the remaining ``size % N`` batches one by one on the first tower. The
    towers are named ``<tower_name><i>`` and reuse the training variables. Hooks added with
    ``register_hook`` run around every run, parallel or not. Chief-only by default.
    """

    def __init__(self, input, infs, gpus, tower_name: str = "InferenceTower", tower_func=None):
        if _is_dataflow(input) and not isinstance(input, QueueInput):
            input = QueueInput(input)
        if not isinstance(input, QueueInput):
            raise TypeError(f"DataParallelInferenceRunner takes a QueueInput or a DataFlow, not {input!r}")
        super().__init__(input, infs)
        if self._size <= 0:
            raise ValueError(
                "DataParallelInferenceRunner needs an input of known, non-zero size (len(dataflow))"
            )
        if isinstance(gpus, int) and not isinstance(gpus, bool):
            gpus = list(range(gpus))
        self._gpus = list(gpus)
        if not self._gpus:
            raise ValueError("DataParallelInferenceRunner needs at least one device")
        self._tower_name = tower_name
        self._tower_func = tower_func

    def _setup_graph(self) -> None:
        tower_func = self._tower_func or self.trainer.tower_func
        if tower_func is None:
            raise ValueError(f"{self} needs tower_func= when the trainer has no tower function")
        self._setup_input(tower_func.input_signature)
        devices = resolve_devices(self._gpus)
        self._tower_fetches, self._slices = [], None
        with self.graph.name_scope(None):
            for i, device in enumerate(devices):
                inputs = self._input.get_input_tensors()  # every tower dequeues its own batch
                with (
                    tf.device(device),
                    tfv1.variable_scope(tfv1.get_variable_scope(), reuse=True),
                    PredictTowerContext(f"{self._tower_name}{i}", vs_name=self.trainer.training_vs_name(i)),
                ):
                    tower_func(*inputs)
                fetches, self._slices = self._fetches_in(tower_func.towers[-1])
                self._tower_fetches.append(fetches)
            self._setup_input_callbacks()

    def _run_pass(self) -> int:
        towers = len(self._tower_fetches)
        for _ in range(self._size // towers):
            for values in self._hooked_sess.run(self._tower_fetches):
                self._hand_over(values, self._slices)
        for _ in range(self._size % towers):
            self._hand_over(self._hooked_sess.run(self._tower_fetches[0]), self._slices)
        return self._size

    def __str__(self) -> str:
        return f"DataParallelInferenceRunner({self._tower_name}, {len(self._gpus)} towers)"
