"""InferenceRunner: evaluate Inferencers on a validation input with a prediction tower, every epoch."""

from __future__ import annotations

import logging
import time

from ..compat import tf, tfv1
from ..input_source.base import InputSource
from ..input_source.feed import FeedInput
from ..input_source.staging import StagingInput
from ..tower import PredictTowerContext
from .base import Callback
from .inference import Inferencer

logger = logging.getLogger("towerpack.trainer.callbacks")

__all__ = ["InferenceRunner"]


def _device_name(device) -> str:
    """An int is a GPU index (-1 or no visible GPU: the CPU); a string is used as it is."""
    if isinstance(device, str):
        return device
    if device < 0 or not tf.config.list_physical_devices("GPU"):
        return "/cpu:0"
    return f"/gpu:{device}"


def _training_vs_name(trainer, device) -> str:
    """The variable scope of the training variables a prediction tower on ``device`` should reuse."""
    fn = getattr(trainer, "_vs_name_for_predictor", None)
    if callable(fn):
        return fn(device if isinstance(device, int) else 0)
    try:
        return trainer.tower_func.towers.training()[0].vs_name or ""
    except (AttributeError, IndexError, TypeError):
        return ""


class InferenceRunner(Callback):
    """Run a prediction tower over ``input`` at every trigger (by default, after every epoch) and
    send the inferencers' results to the monitors.

    ``input`` is an InputSource or a DataFlow (which becomes ``FeedInput(df, infinite=False)``);
    every pass starts with ``input.reset_state()`` and runs ``input.size()`` batches, or until the
    input is exhausted when its size is unknown. The tower is built with ``tower_func`` (default:
    the trainer's) under ``PredictTowerContext(tower_name)`` on ``device``, reusing the training
    variables. It runs in the trainer's plain session, so training hooks do not fire. Chief-only
    by default.
    """

    def __init__(self, input, infs, tower_name: str = "InferenceTower", tower_func=None, device=0):
        if not isinstance(input, InputSource):
            if not (hasattr(input, "__iter__") and hasattr(input, "reset_state")):
                raise TypeError(f"InferenceRunner takes an InputSource or a DataFlow, not {input!r}")
            input = FeedInput(input, infinite=False)
        if isinstance(input, StagingInput):
            raise TypeError(
                "InferenceRunner cannot read a StagingInput; give it the input StagingInput wraps"
            )
        infs = [infs] if isinstance(infs, Inferencer) else list(infs)
        for inf in infs:
            if not isinstance(inf, Inferencer):
                raise TypeError(f"InferenceRunner takes Inferencers, got {inf!r}")
        self._input = input
        self.infs = infs
        self._tower_name = tower_name
        self._tower_func = tower_func
        self._device = device

    def _setup_graph(self) -> None:
        tower_func = self._tower_func or getattr(self.trainer, "tower_func", None)
        if tower_func is None:
            raise ValueError("InferenceRunner needs tower_func= when the trainer has no tower function")
        signature = tower_func.input_signature
        self._input_callbacks = (
            self._input.get_callbacks() if self._input.setup_done() else self._input.setup(signature)
        )
        # A tower is named from the root, not under this callback's name scope.
        with self.graph.name_scope(None):
            inputs = self._input.get_input_tensors()
            with (
                tf.device(_device_name(self._device)),
                tfv1.variable_scope(tfv1.get_variable_scope(), reuse=True),
                PredictTowerContext(self._tower_name, vs_name=_training_vs_name(self.trainer, self._device)),
            ):
                tower_func(*inputs)
            for cb in self._input_callbacks:
                cb.setup_graph(self.trainer)
        handle = tower_func.towers[-1]
        self._fetches, self._slices = [], []
        for inf in self.infs:
            start = len(self._fetches)
            for name in inf.get_fetches():
                try:
                    self._fetches.append(handle.get_tensor(name))
                except KeyError as e:
                    raise ValueError(f"{inf}: cannot fetch {name!r} in the inference tower: {e}") from None
            self._slices.append(slice(start, len(self._fetches)))

    def _before_train(self) -> None:
        for cb in self._input_callbacks:
            cb.before_train()

    def _after_train(self) -> None:
        for cb in self._input_callbacks:
            cb.after_train()

    def _trigger(self) -> None:
        results, _ = self._run_inference()
        for name, value in results.items():
            self.trainer.monitors.put_scalar(name, value)

    def _run_inference(self) -> tuple[dict, int]:
        """One pass over the input: the inferencers' results, and the number of batches run."""
        sess = getattr(self.trainer, "sess", None) or tfv1.get_default_session()
        for inf in self.infs:
            inf.before_inference()
        self._input.reset_state()
        try:
            total = self._input.size()
        except NotImplementedError:
            total = None
        start, n = time.perf_counter(), 0
        while total is None or n < total:
            try:
                values = self._run(sess)
            except tf.errors.OutOfRangeError:
                if total is not None:
                    logger.warning("InferenceRunner: the input ended after %d of %d batches", n, total)
                break
            for inf, sl in zip(self.infs, self._slices, strict=True):
                inf.on_fetches(values[sl])
            n += 1
        logger.info("InferenceRunner: %d batches in %.2f s", n, time.perf_counter() - start)
        results = {}
        for inf in self.infs:
            results.update(inf.after_inference())
        return results, n

    def _run(self, sess) -> list:
        """One run with the input's callbacks around it (they feed or stage the batch)."""
        ctx = tfv1.train.SessionRunContext(
            original_args=tfv1.train.SessionRunArgs(self._fetches), session=sess
        )
        requests = [cb.before_run(ctx) for cb in self._input_callbacks]
        feed = {}
        for r in requests:
            if r is not None and r.feed_dict:
                feed.update(r.feed_dict)
        extra = [r.fetches if r is not None else [] for r in requests]
        values, extra_values = sess.run([self._fetches, extra], feed_dict=feed or None)
        for cb, r, v in zip(self._input_callbacks, requests, extra_values, strict=True):
            if r is not None:
                cb.after_run(ctx, tfv1.train.SessionRunValues(results=v, options=None, run_metadata=None))
        return values

    def __str__(self) -> str:
        return f"InferenceRunner({self._tower_name})"
