"""The InputSource interface: where a trainer's input tensors come from."""

from __future__ import annotations

import contextlib
import functools

from towerpack.dataflow.pipeline.base import dataflow_len

from ..callback import Callback
from ..compat import tfv1
from .wait_clock import GraphWaitClock, WaitClock

__all__ = ["FeedfreeInput", "InputSource", "InputSourceCallback", "dataflow_size"]


class InputSource:
    """Base class of input sources.

    A trainer calls ``setup(input_signature)`` once while building the graph, registers the
    callbacks it returns, and calls ``get_input_tensors()`` once per tower. Subclasses implement
    ``_setup``, ``_get_input_tensors`` and optionally ``_get_callbacks``, ``_reset_state`` and
    ``_size``.
    """

    _name_scope = None
    _setup_done = False

    def get_input_tensors(self) -> list:
        """Input tensors in the order of the input signature.

        Feed-free sources return new tensors on every call (one call per tower), so each tower
        reads its own batch.
        """
        if not self._setup_done:
            raise RuntimeError(f"{type(self).__name__}.setup() must be called before get_input_tensors()")
        return self._get_input_tensors()

    def setup(self, input_signature) -> list[Callback]:
        """Build what the source needs in the graph; returns the callbacks to register."""
        if self._setup_done:
            raise RuntimeError(f"{type(self).__name__}.setup() was already called")
        self._input_signature = list(input_signature)
        with self.cached_name_scope():
            self._setup(self._input_signature)
        self._setup_done = True
        return self.get_callbacks()

    def setup_done(self) -> bool:
        return self._setup_done

    @functools.cache  # noqa: B019  (one list per source, kept as long as the source)
    def get_callbacks(self) -> list[Callback]:
        """Callbacks that drive this source; they run on every process, chief or not.

        The first one is an :class:`InputSourceCallback`: it resets the source's state before
        training starts, and through it the trainer finds the source.
        """
        if not self._setup_done:
            raise RuntimeError(f"{type(self).__name__}.setup() must be called before get_callbacks()")
        cbs = [InputSourceCallback(self), *self._get_callbacks()]
        for cb in cbs:
            cb.set_chief_only(False)
        return cbs

    def reset_state(self) -> None:
        """Start (or restart) the source; called before training and by inference runners."""
        self._reset_state()

    def raise_if_failed(self) -> None:
        """Raise the error of the source's background producer, if it failed.

        A producer thread that fails closes its queue, so a step waiting on it gets
        ``tf.errors.OutOfRangeError``, as if the input were exhausted; the trainer calls this
        to tell the two apart. Sources without a background producer never raise.
        """
        self._raise_if_failed()

    def measure_wait(self) -> None:
        """Measure how long training steps wait for this source's data; call it before ``setup``
        (trainers do, unless their ``measure_input_wait`` is False; no effect once set up).

        FeedInput measures in Python and needs nothing. Feed-free sources then time their
        tensors in the graph with a local variable: a session driving them by hand must run
        ``tf.compat.v1.local_variables_initializer()``.
        """
        if not self._setup_done:
            self._measure_wait()

    def wait_clock(self) -> WaitClock | None:
        """The clock of the time training steps waited for this source's data (None: it cannot tell).

        A source that passes on another source's tensors returns that source's clock.
        """
        return self._wait_clock()

    def size(self) -> int:
        """Number of elements the source produces per epoch; raises NotImplementedError if unknown."""
        return self._size()

    @contextlib.contextmanager
    def cached_name_scope(self):
        """The same name scope for every use of this source, so its ops group together."""
        if self._name_scope is None:
            with tfv1.name_scope(type(self).__name__) as scope:
                self._name_scope = scope
                yield scope
        else:
            with tfv1.name_scope(self._name_scope) as scope:
                yield scope

    # ---- for subclasses ----------------------------------------------------------------------
    def _setup(self, input_signature) -> None:
        pass

    def _get_input_tensors(self) -> list:
        raise NotImplementedError

    def _get_callbacks(self) -> list[Callback]:
        return []

    def _reset_state(self) -> None:
        pass

    def _size(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} does not know its size")

    def _raise_if_failed(self) -> None:
        pass

    def _measure_wait(self) -> None:
        pass

    def _wait_clock(self) -> WaitClock | None:
        return None


class InputSourceCallback(Callback):
    """The first callback of every input source: resets it before training; ``source`` is the source."""

    def __init__(self, source: InputSource):
        self.source = source

    def _before_train(self) -> None:
        self.source.reset_state()


class FeedfreeInput(InputSource):
    """Base for sources whose tensors come from the graph itself (queues, datasets, staging), not
    from a feed_dict; multi-tower trainers require one.

    After ``measure_wait()``, every tower's input tensors are timed in the graph by a
    :class:`GraphWaitClock`. Sources that pass on another source's tensors override
    ``_measure_wait`` to ask that source instead.
    """

    _wants_clock = False
    _graph_clock: GraphWaitClock | None = None

    def _measure_wait(self) -> None:
        self._wants_clock = True

    def setup(self, input_signature) -> list[Callback]:
        if self._wants_clock and not self._setup_done:
            with self.cached_name_scope():
                self._graph_clock = GraphWaitClock()
        return super().setup(input_signature)

    def get_input_tensors(self) -> list:
        clock = self._graph_clock
        if clock is None:
            return super().get_input_tensors()
        return clock.timed(super().get_input_tensors)

    def _wait_clock(self) -> WaitClock | None:
        return self._graph_clock


def dataflow_size(ds, what: str | None = None) -> int:
    """``len(ds)``, or NotImplementedError naming ``what`` (default: the dataflow) when it has none."""
    size = dataflow_len(ds) if ds is not None else None
    if size is None:
        raise NotImplementedError(f"{what or type(ds).__name__} has no len()")
    return size
