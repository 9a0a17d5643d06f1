"""Wait clocks: how long training steps waited for an input source's data.

Each source that can tell owns one clock (``InputSource.wait_clock()``); ``InputWaitTracker``
reads it once per epoch. A FeedInput produces the batch in Python before every run, so its
clock adds up those seconds in Python. A feed-free source's tensors are produced inside
``session.run``: the clock wraps each tower's input ops between two ``tf.timestamp()`` ops and
adds the difference to a float64 local variable in the same run (the model's inputs depend on
that addition, so any run that consumes a batch times it, and no other run does).
"""

from __future__ import annotations

from collections.abc import Callable

from ..compat import tf, tfv1

__all__ = ["GraphWaitClock", "PythonWaitClock", "WaitClock"]


class WaitClock:
    """Seconds spent waiting for input since the session started, summed over ``readers``."""

    #: How many readers (towers) add their waits to this clock.
    readers: int = 1

    def total_seconds(self, sess) -> float:
        raise NotImplementedError


class PythonWaitClock(WaitClock):
    """Seconds the training thread spent producing batches (FeedInput calls ``add``)."""

    def __init__(self):
        self.seconds = 0.0

    def add(self, seconds: float) -> None:
        self.seconds += seconds

    def total_seconds(self, sess) -> float:
        return self.seconds


class GraphWaitClock(WaitClock):
    """Seconds the runs' input ops blocked, measured in the graph; one reader per ``timed`` call.

    Create it outside any tower (its variable is local: not saved, not synchronized, not
    trained) and wrap every tower's input with ``timed``.
    """

    DEVICE = "/cpu:0"

    def __init__(self):
        self.readers = 0
        with tf.device(self.DEVICE):
            self._seconds = tfv1.Variable(
                0.0,
                dtype=tf.float64,
                trainable=False,
                collections=[tfv1.GraphKeys.LOCAL_VARIABLES],
                name="input_wait_seconds",
            )

    def timed(self, make_tensors: Callable[[], list]) -> list:
        """Call ``make_tensors()`` to build one tower's input tensors; returns them timed."""
        with tf.device(self.DEVICE):
            start = tf.timestamp(name="wait_start")
        with tf.control_dependencies([start]):
            tensors = list(make_tensors())
        with tf.device(self.DEVICE), tf.control_dependencies([t.op for t in tensors]):
            waited = tf.subtract(tf.timestamp(name="wait_end"), start, name="waited")
            add = self._seconds.assign_add(waited, read_value=False)
        with tf.control_dependencies([add]):
            out = [tf.identity(t, name="timed") for t in tensors]
        self.readers += 1
        return out

    def total_seconds(self, sess) -> float:
        return float(sess.run(self._seconds))
