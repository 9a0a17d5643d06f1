"""InferenceRunner: evaluate Inferencers on a validation input with a prediction tower, every epoch.

``InferenceRunnerBase`` holds what every runner shares: the input and its callbacks, the
inferencers, private hooked runs of the trainer's session (the input's callbacks, and hooks
added with ``register_hook``, run around each of them; the training callbacks do not) and the
pass over the input. ``InferenceRunner`` evaluates with one tower;
``DataParallelInferenceRunner`` (``data_parallel_inference.py``) with one tower per device.
"""

from __future__ import annotations

import logging
import time

from ..callback import Callback
from ..compat import tf, tfv1
from ..hooked_session import HookedRuns
from ..input_source.base import InputSource
from ..input_source.feed import FeedInput
from ..input_source.staging import StagingInput
from ..tower import PredictTowerContext
from .group import CallbackToHook
from .inference import Inferencer

logger = logging.getLogger("towerpack.trainer.callbacks")

__all__ = ["InferenceRunner", "InferenceRunnerBase"]


def _device_name(device) -> str:
    """An int is a GPU index (-1 or no visible GPU: the CPU); a string is used as it is."""
    if isinstance(device, str):
        return device
    if device < 0 or not tf.config.list_physical_devices("GPU"):
        return "/cpu:0"
    return f"/gpu:{device}"


def _is_dataflow(x) -> bool:
    return hasattr(x, "__iter__") and hasattr(x, "reset_state")


class InferenceRunnerBase(Callback):
    """Base class of inference runners: an input, inferencers, and private hooked runs.

    ``input`` is an InputSource or a DataFlow (``FeedInput(df, infinite=False)`` by default);
    ``size`` is its ``size()``, 0 when unknown (a pass then runs until the input is exhausted).
    Subclasses build their towers in ``_setup_graph`` (calling ``_setup_input``) and run passes
    with ``_hooked_sess``.
    """

    def __init__(self, input, infs):
        if not isinstance(input, InputSource):
            if not _is_dataflow(input):
                raise TypeError(f"{type(self).__name__} takes an InputSource or a DataFlow, not {input!r}")
            input = FeedInput(input, infinite=False)
        if isinstance(input, StagingInput):
            raise TypeError(
                f"{type(self).__name__} cannot read a StagingInput; give it the input StagingInput wraps"
            )
        infs = [infs] if isinstance(infs, Inferencer) else list(infs)
        for inf in infs:
            if not isinstance(inf, Inferencer):
                raise TypeError(f"{type(self).__name__} takes Inferencers, got {inf!r}")
        self._input = input
        self.infs = infs
        try:
            self._size = input.size()
        except NotImplementedError:
            self._size = 0
        self._hooks: list = []
        self._hooked_sess = None

    def register_hook(self, hook) -> None:
        """Run a ``SessionRunHook`` around every inference run (call before training starts)."""
        if self._hooked_sess is not None:
            raise RuntimeError(f"{self}: register_hook() must be called before training starts")
        if not isinstance(hook, tfv1.train.SessionRunHook):
            raise TypeError(f"register_hook takes a tf.compat.v1.train.SessionRunHook, got {hook!r}")
        self._hooks.append(hook)

    def _setup_input(self, signature) -> None:
        """Set the input up, unless the trainer (or another runner) already did."""
        self._input_callbacks = (
            self._input.get_callbacks() if self._input.setup_done() else self._input.setup(signature)
        )

    def _setup_input_callbacks(self) -> None:
        for cb in self._input_callbacks:
            cb.setup_graph(self.trainer)

    def _before_train(self) -> None:
        hooks = [CallbackToHook(cb) for cb in self._input_callbacks if cb._takes_part_in_runs()]
        self._hooked_sess = HookedRuns(self.trainer.sess, hooks + self._hooks)
        for cb in self._input_callbacks:
            cb.before_train()
        if self._size > 0:
            logger.info("%s will evaluate %d batches each time", self, self._size)
        else:
            logger.warning("%s: the input has no known size; each pass runs until it is exhausted", self)

    def _after_train(self) -> None:
        for cb in self._input_callbacks:
            cb.after_train()

    def _trigger(self) -> None:
        results, _ = self._run_inference()
        for name, value in results.items():
            self.trainer.monitors.put_scalar(name, value)

    def _run_inference(self) -> tuple[dict, int]:
        """One pass over the input: the inferencers' results, and the number of runs made."""
        for inf in self.infs:
            inf.before_inference()
        self._input.reset_state()
        start = time.perf_counter()
        n = self._run_pass()
        logger.info("%s: %d batches in %.2f s", self, n, time.perf_counter() - start)
        results = {}
        for inf in self.infs:
            results.update(inf.after_inference())
        return results, n

    def _run_pass(self) -> int:
        """Run the towers over the input and hand the values to the inferencers; return the
        number of batches evaluated."""
        raise NotImplementedError

    def _fetches_in(self, handle) -> tuple[list, list[slice]]:
        """The inferencers' fetches in a tower, and which of them belong to each inferencer."""
        fetches, slices = [], []
        for inf in self.infs:
            start = len(fetches)
            for name in inf.get_fetches():
                try:
                    fetches.append(handle.get_tensor(name))
                except KeyError as e:
                    raise ValueError(f"{inf}: cannot fetch {name!r} in the inference tower: {e}") from None
            slices.append(slice(start, len(fetches)))
        return fetches, slices

    def _hand_over(self, values, slices) -> None:
        for inf, sl in zip(self.infs, slices, strict=True):
            inf.on_fetches(values[sl])


class InferenceRunner(InferenceRunnerBase):
    """Run a prediction tower over ``input`` at every trigger (by default, after every epoch) and
    send the inferencers' results to the monitors.

    ``input`` is an InputSource or a DataFlow (which becomes ``FeedInput(df, infinite=False)``);
    every pass starts with ``input.reset_state()`` and runs ``input.size()`` batches, or until the
    input is exhausted when its size is unknown. The tower is built with ``tower_func`` (default:
    the trainer's) under ``PredictTowerContext(tower_name)`` on ``device``, reusing the training
    variables. It runs in the trainer's session with hooks of its own, so training hooks do not
    fire. Chief-only by default.
    """

    def __init__(self, input, infs, tower_name: str = "InferenceTower", tower_func=None, device=0):
        super().__init__(input, infs)
        self._tower_name = tower_name
        self._tower_func = tower_func
        self._device = device

    def _setup_graph(self) -> None:
        tower_func = self._tower_func or self.trainer.tower_func
        if tower_func is None:
            raise ValueError(f"{self} needs tower_func= when the trainer has no tower function")
        self._setup_input(tower_func.input_signature)
        vs_name = self.trainer.training_vs_name(self._device if isinstance(self._device, int) else 0)
        # A tower is named from the root, not under this callback's name scope.
        with self.graph.name_scope(None):
            inputs = self._input.get_input_tensors()
            with (
                tf.device(_device_name(self._device)),
                tfv1.variable_scope(tfv1.get_variable_scope(), reuse=True),
                PredictTowerContext(self._tower_name, vs_name=vs_name),
            ):
                tower_func(*inputs)
            self._setup_input_callbacks()
        self._fetches, self._slices = self._fetches_in(tower_func.towers[-1])

    def _run_pass(self) -> int:
        n = 0
        while self._size == 0 or n < self._size:
            try:
                values = self._hooked_sess.run(self._fetches)
            except tf.errors.OutOfRangeError:
                if self._size:
                    logger.warning("%s: the input ended after %d of %d batches", self, n, self._size)
                break
            self._hand_over(values, self._slices)
            n += 1
        return n

    def __str__(self) -> str:
        return f"{type(self).__name__}({self._tower_name})"
