"""StagingInput: prefetch another feed-free input onto the compute device with a StagingArea."""

from __future__ import annotations

import contextlib

from tensorflow.python.ops.data_flow_ops import StagingArea

from ..callback import Callback
from ..compat import tf, tfv1
from .base import FeedfreeInput, InputSource
from .utils import depends_on

__all__ = ["StagingInput"]


class _StagingCallback(Callback):
    """Fills the areas ``nr_stage`` deep on the first run, then stages one batch with every run
    that consumes one."""

    _chief_only = False

    def __init__(self, source: StagingInput, nr_stage: int):
        self._source = source
        self._nr_stage = nr_stage
        self._prefilled = False
        self._needs_stage: dict = {}

    def _setup_graph(self) -> None:
        self._stage_op = tf.group(*self._source._stage_ops, name="stage_all")
        self._unstage_ops = list(self._source._unstage_ops)
        self._stage_args = tfv1.train.SessionRunArgs(fetches=self._stage_op)

    def _before_run(self, ctx):
        fetches = ctx.original_args.fetches
        key = _fetch_key(fetches)
        needs = self._needs_stage.get(key)
        if needs is None:
            needs = depends_on(fetches, self._unstage_ops)
            self._needs_stage[key] = needs
        if not needs:
            return None
        if not self._prefilled:
            # Prefill here, not in before_train: sources such as QueueInput only start then.
            for _ in range(self._nr_stage):
                ctx.session.run(self._stage_op)
            self._prefilled = True
        return self._stage_args


def _fetch_key(fetches):
    """A hashable key for a run's fetches (they are usually the same objects every step)."""
    if isinstance(fetches, dict):
        return tuple((k, _fetch_key(v)) for k, v in sorted(fetches.items(), key=lambda kv: str(kv[0])))
    if isinstance(fetches, (list, tuple)):
        return tuple(_fetch_key(f) for f in fetches)
    return fetches if isinstance(fetches, str) else id(fetches)


class StagingInput(FeedfreeInput):
    """Wrap a feed-free input so that each tower's batch is copied to its device one step ahead.

    Each ``get_input_tensors`` call (one per tower) creates a StagingArea on the current device
    (or ``device``); a run that consumes the staged tensors also stages the next batch, so the
    host-to-device copy overlaps the computation. The areas are prefilled ``nr_stage`` deep on
    the first such run. Runs that do not depend on the input (e.g. callbacks' own ``sess.run``)
    leave the areas alone. All towers' inputs must be consumed in the same run.
    """

    def __init__(self, input: InputSource, nr_stage: int = 1, device: str | None = None):
        if not isinstance(input, FeedfreeInput):
            raise TypeError(f"StagingInput wraps a feed-free input (e.g. QueueInput), not {input!r}")
        if isinstance(input, StagingInput):
            raise TypeError("StagingInput cannot wrap another StagingInput")
        if nr_stage < 1:
            raise ValueError(f"nr_stage must be at least 1, got {nr_stage}")
        self._input = input
        self._nr_stage = nr_stage
        self._device = device
        self._stage_ops: list = []
        self._unstage_ops: list = []

    def _setup(self, input_signature) -> None:
        self._input.setup(input_signature)
        self._callback = _StagingCallback(self, self._nr_stage)

    def _size(self) -> int:
        return self._input.size()

    def _get_input_tensors(self) -> list:
        inputs = self._input.get_input_tensors()
        with tf.device(self._device) if self._device else contextlib.nullcontext():
            # Identities on the target device make the copy happen before the put.
            inputs = [tf.identity(x) for x in inputs]
            area = StagingArea(dtypes=[x.dtype for x in inputs], shapes=None)
            self._stage_ops.append(area.put(inputs))
            outputs = area.get()
        if isinstance(outputs, tf.Tensor):
            outputs = [outputs]
        outputs = list(outputs)
        for staged, original in zip(outputs, inputs, strict=True):
            staged.set_shape(original.shape)
        self._unstage_ops.append(outputs[0].op)
        return outputs

    def _get_callbacks(self) -> list[Callback]:
        # The wrapped input's callbacks (its reset, its thread) come first, then the staging.
        return [*self._input.get_callbacks(), self._callback]

    def _reset_state(self) -> None:
        pass  # the wrapped input is reset by its own callback

    def _raise_if_failed(self) -> None:
        self._input.raise_if_failed()

    # The wrapped input times its own reads: a step waits for data there (staged batches are
    # already on the device), so the staging ops are not timed again.
    def _measure_wait(self) -> None:
        self._input.measure_wait()

    def _wait_clock(self):
        return self._input.wait_clock()
