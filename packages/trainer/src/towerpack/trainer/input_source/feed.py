"""FeedInput: a DataFlow fed through placeholders with every hooked session run."""

from __future__ import annotations

import time

from towerpack.dataflow import repeat_forever

from ..callback import Callback
from ..compat import tf, tfv1
from .base import InputSource, dataflow_size
from .utils import DatapointChecker, placeholders_for
from .wait_clock import PythonWaitClock

__all__ = ["FeedInput"]


class _FeedCallback(Callback):
    """Adds the next datapoint as the feed_dict of every hooked run."""

    _chief_only = False

    def __init__(self, source: FeedInput):
        self._source = source

    def before_run(self, ctx):
        return tfv1.train.SessionRunArgs(fetches=None, feed_dict=self._source._next_feed())


class FeedInput(InputSource):
    """Feed datapoints of a DataFlow into placeholders, one datapoint per hooked ``session.run``.

    The simplest input and the slowest: Python produces every batch in the training thread. The
    placeholders are the same on every ``get_input_tensors`` call, so it cannot serve several
    towers. With ``infinite=True`` the DataFlow is iterated again and again; with
    ``infinite=False`` the run after the last datapoint raises ``tf.errors.OutOfRangeError``
    (which ends training, or an inference pass, cleanly). The time spent getting each datapoint
    is time the step waits for input (its ``wait_clock()``).
    """

    def __init__(self, ds, infinite: bool = True):
        for attr in ("__iter__", "reset_state"):
            if not hasattr(ds, attr):
                raise TypeError(f"FeedInput needs a DataFlow (with {attr}), got {type(ds).__name__}")
        self.ds = ds
        self.infinite = infinite
        self._iter = None
        self._ds_was_reset = False
        self._clock = PythonWaitClock()
        self._tracker = None

    def follow_positions(self, tracker) -> None:
        """Read the DataFlow through ``tracker`` (a PositionTracker in tag mode), which logs the
        position tags of every datapoint taken (``TrainConfig(exact_resume=True)``); None: read the
        DataFlow itself."""
        self._tracker = tracker

    def _size(self) -> int:
        return dataflow_size(self.ds)

    def _setup(self, input_signature) -> None:
        self._placeholders = placeholders_for(input_signature)
        self._feed_names = [p.name for p in self._placeholders]
        self._check = DatapointChecker(input_signature, "FeedInput")
        self._callback = _FeedCallback(self)

    def _get_input_tensors(self) -> list:
        return list(self._placeholders)

    def _get_callbacks(self) -> list[Callback]:
        return [self._callback]

    def _wait_clock(self) -> PythonWaitClock:
        return self._clock

    def _reset_state(self) -> None:
        # A DataFlow is reset once (it may start processes); later resets start a new pass.
        if not self._ds_was_reset:
            self.ds.reset_state()
            self._ds_was_reset = True
        if self._tracker is not None:  # one stream, logged: a later reset continues it
            self._iter = self._iter or self._tracker.iterate()
            return
        self._iter = repeat_forever(self.ds) if self.infinite else iter(self.ds)

    # ---- a restart in place (towerpack.trainer.resize.input_restart) -------------------------------
    def stop_producing(self) -> int:
        """End the iteration of the DataFlow under way (what its stages held goes with it), leaving the
        DataFlow as it is; :meth:`start_producing` starts a new one. Returns 0: a datapoint is taken only
        for the run that trains on it, so none was taken ahead."""
        stream, self._iter = self._iter, None
        close = getattr(stream, "close", None)
        if close is not None:
            close()
        return 0

    def start_producing(self) -> None:
        """Read the DataFlow again after :meth:`stop_producing`, from a new iteration (through the tracker
        the source follows now)."""
        self._reset_state()

    def _next_feed(self) -> dict:
        """The next feed_dict; the time it takes is time the step waits for input."""
        if self._iter is None:
            raise RuntimeError("FeedInput.reset_state() was not called before the first run")
        start = time.perf_counter()
        try:
            dp = next(self._iter)
        except StopIteration:
            raise tf.errors.OutOfRangeError(None, None, "FeedInput: the DataFlow is exhausted") from None
        # Keyed by name: hashing strings is cheaper than hashing tensors, and feeds accept both.
        feed = dict(zip(self._feed_names, self._check(dp), strict=True))
        self._clock.add(time.perf_counter() - start)
        return feed
