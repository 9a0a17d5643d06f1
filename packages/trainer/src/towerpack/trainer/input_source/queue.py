"""QueueInput: a Python thread moves DataFlow datapoints into a TF FIFOQueue the graph dequeues from.

The enqueue thread uses only QueueInput's public producer interface (``datapoints``,
``enqueue_function``, ``close_queue``, ``close_dataflow``), which is also what a subclass
changes: ZMQInput, for one, only replaces ``datapoints``.

Shutdown is quiet: the thread is told to stop and, if it is blocked on a full queue, one slot
is freed so that its enqueue completes; the queue is closed only once the thread is gone. (A
pending enqueue cancelled by closing the queue makes TensorFlow log "Local rendezvous is
aborting with status: CANCELLED" at the end of every run.) A restart in place stops the thread
the same way but keeps the queue open and empties it (``stop_producing``, ``start_producing``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np

from towerpack.dataflow import repeat_forever

from ..callback import Callback
from ..compat import tf, tfv1
from ..hooked_session import make_session_callable
from .base import FeedfreeInput, dataflow_size
from .utils import DatapointChecker, logger, placeholders_for

__all__ = ["EnqueueThread", "QueueInput"]

#: Seconds ``stop_thread`` waits for the enqueue thread (it is a daemon thread either way).
JOIN_TIMEOUT_S = 5.0
#: How often ``stop_thread`` looks whether the thread is blocked on a full queue.
_DRAIN_POLL_S = 0.02


class EnqueueThread(threading.Thread):
    """Moves the datapoints of a QueueInput into its queue until stopped.

    Stops when ``stop()`` is called or the queue is closed; any other error is kept in ``error``,
    logged, and the queue is closed so that the consumer does not wait forever.
    """

    def __init__(self, source: QueueInput, sess):
        super().__init__(name=f"{type(source).__name__}-enqueue", daemon=True)
        self._source = source
        self._sess = sess
        self._stop_event = threading.Event()
        self._keep_dataflow = False
        self.error: BaseException | None = None

    def stop(self, keep_dataflow: bool = False) -> None:
        """Ask the thread to stop; it closes the DataFlow as it ends unless ``keep_dataflow``."""
        self._keep_dataflow = keep_dataflow
        self._stop_event.set()

    def stopped(self) -> bool:
        return self._stop_event.is_set()

    def run(self) -> None:
        src = self._source
        stream = None
        try:
            enqueue = src.enqueue_function(self._sess)
            stream = src.datapoints(self._stop_event)
            for dp in stream:
                if self._stop_event.is_set():
                    return
                enqueue(dp)
        except (tf.errors.CancelledError, tf.errors.OutOfRangeError):
            pass  # the queue was closed: training is over
        except Exception as e:
            if self._stop_event.is_set() or _session_closed(e):
                return
            self.error = e  # recorded before the queue closes: a reader woken by the close sees it
            logger.error("%s: the input thread failed, closing the queue", type(src).__name__, exc_info=True)
            src.close_queue(self._sess)
        finally:
            close = getattr(stream, "close", None)
            if close is not None:  # ends the DataFlow's iteration now, in this thread
                close()
            if not self._keep_dataflow:
                src.close_dataflow()


def _session_closed(e: BaseException) -> bool:
    return isinstance(e, RuntimeError) and "closed Session" in str(e)


class _QueueCallback(Callback):
    """Starts the enqueue thread, reports the queue's fill level, stops the thread after training."""

    _chief_only = False
    #: Sample the queue size every this many steps (one extra tiny fetch).
    SIZE_EVERY = 20

    def __init__(self, source: QueueInput):
        self._source = source
        self._size_ema = None
        self._runs = 0
        self._size_args = tfv1.train.SessionRunArgs(fetches=source.size_tensor)

    def _before_train(self) -> None:
        self._source.start_thread(self.trainer.sess or tfv1.get_default_session())

    def before_run(self, ctx):
        self._source.raise_if_failed()
        self._runs += 1
        return self._size_args if self._runs % self.SIZE_EVERY == 0 else None

    def _after_run(self, run_context, run_values) -> None:
        if run_values.results is not None:
            size = float(run_values.results)
            self._size_ema = size if self._size_ema is None else 0.9 * self._size_ema + 0.1 * size

    def _trigger_epoch(self) -> None:
        monitors = self.trainer.monitors
        if self._size_ema is not None and monitors is not None:
            monitors.put_scalar(f"{type(self._source).__name__}/queue_size", self._size_ema)

    def _after_train(self) -> None:
        self._source.stop_thread()


class QueueInput(FeedfreeInput):
    """Prefetch datapoints of a DataFlow into a ``FIFOQueue(50)`` from a background thread.

    The training step dequeues without a feed_dict, so the Python data loading overlaps with
    the computation. Every ``get_input_tensors`` call makes a new dequeue, so several towers
    each read their own batch. The fill level (``QueueInput/queue_size``, 0..capacity) goes to
    the monitors at every epoch: near capacity means the input keeps up, near 0 means training
    waits for data.

    The thread is started by the source's callback before training and stopped after it; code
    that drives the graph by hand calls ``start_thread(sess)`` and ``stop_thread()`` itself.
    """

    def __init__(self, ds, queue=None):
        for attr in ("__iter__", "reset_state"):
            if not hasattr(ds, attr):
                raise TypeError(f"{type(self).__name__} takes a DataFlow (with {attr}), not {ds!r}")
        self.ds = ds
        self.queue = queue
        self.thread: EnqueueThread | None = None
        self._sess = None
        self._ds_was_reset = False
        self._tracker = None

    def follow_positions(self, tracker) -> None:
        """Read the DataFlow through ``tracker`` (a PositionTracker in tag mode), which logs the
        position tags of every datapoint taken, in the order they enter the queue
        (``TrainConfig(exact_resume=True)``); None: read the DataFlow itself."""
        self._tracker = tracker

    def _size(self) -> int:
        return dataflow_size(self.ds)

    def _setup(self, input_signature) -> None:
        self._placeholders = placeholders_for(input_signature)
        self._check = DatapointChecker(input_signature, type(self).__name__)
        dtypes = [p.dtype for p in self._placeholders]
        with tf.device("/cpu:0"):
            if self.queue is None:
                self.queue = tfv1.FIFOQueue(50, dtypes, name="input_queue")
            elif list(self.queue.dtypes) != dtypes:
                raise ValueError(f"the queue's dtypes {self.queue.dtypes} do not match the inputs' {dtypes}")
            self._enqueue_op = self.queue.enqueue(self._placeholders, name="enqueue")
            self._close_op = self.queue.close(cancel_pending_enqueues=True, name="close")
            #: The number of datapoints in the queue (a scalar int32 tensor).
            self.size_tensor = self.queue.size(name="queue_size")
            # Frees one slot at shutdown so that a thread blocked on a full queue can finish.
            drained = self.queue.dequeue(name="drain")
            self._drain_op = (drained[0] if isinstance(drained, (list, tuple)) else drained).op
        self._callback = _QueueCallback(self)

    def _get_input_tensors(self) -> list:
        with tf.device("/cpu:0"), self.cached_name_scope():
            ret = self.queue.dequeue(name="dequeue")
        if isinstance(ret, tf.Tensor):  # a queue of one component dequeues a bare tensor
            ret = [ret]
        for t, p in zip(ret, self._placeholders, strict=True):
            t.set_shape(p.shape)
        return list(ret)

    def _get_callbacks(self) -> list[Callback]:
        return [self._callback]

    def _reset_state(self) -> None:
        # The DataFlow is reset once; the thread streams it endlessly, so a later reset (an
        # inference pass) just continues the stream, which stays aligned when every pass
        # consumes exactly size() datapoints.
        if not self._ds_was_reset:
            self.ds.reset_state()
            self._ds_was_reset = True

    # ---- the producer interface (what the enqueue thread uses; subclasses may change it) --------
    def datapoints(self, stop_event: threading.Event) -> Iterator:
        """The endless stream of datapoints the enqueue thread moves into the queue.

        ``stop_event`` is set when the thread should stop; a stream that may wait a long time
        for a datapoint should look at it now and then (the thread checks it between datapoints).
        """
        return self._tracker.iterate() if self._tracker is not None else repeat_forever(self.ds)

    def enqueue_function(self, sess) -> Callable[[object], None]:
        """A function that checks one datapoint against the input signature and enqueues it with
        ``sess`` (blocking while the queue is full)."""
        run = make_session_callable(
            sess, feeds=self._placeholders, targets=[self._enqueue_op], in_caller_thread=True
        )
        dtypes = [p.dtype.as_numpy_dtype for p in self._placeholders]
        check = self._check

        def enqueue(dp) -> None:
            run(*[np.asarray(v, dtype=dt) for v, dt in zip(check(dp), dtypes, strict=True)])

        return enqueue

    def close_queue(self, sess) -> None:
        """Close the queue: waiting dequeues fail with OutOfRangeError once it is empty."""
        # The session may be gone already; the thread is a daemon either way.
        with contextlib.suppress(Exception):
            sess.run(self._close_op)

    def close_dataflow(self) -> None:
        """Release what the DataFlow holds (sockets, processes), if it has a ``close()``."""
        close = getattr(self.ds, "close", None)
        if callable(close):
            close()

    # ---- the thread ------------------------------------------------------------------------------
    def start_thread(self, sess) -> None:
        """Start the enqueue thread, which runs ``sess``."""
        if sess is None:
            raise RuntimeError(f"{type(self).__name__}: no session to run the enqueue thread with")
        if self.thread is not None:
            raise RuntimeError(f"{type(self).__name__} was already started")
        self._sess = sess
        self.thread = EnqueueThread(self, sess)
        self.thread.start()

    def stop_thread(self) -> None:
        """Stop the enqueue thread (within ``JOIN_TIMEOUT_S``), then close the queue."""
        thread = self.thread
        if thread is None:
            return
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        thread.stop()
        self._wait_freeing_slots(thread, deadline)
        self.close_queue(self._sess)
        thread.join(max(0.0, deadline - time.monotonic()))
        if thread.is_alive():
            name = type(self).__name__
            logger.warning("%s: the input thread did not stop within %.0f s", name, JOIN_TIMEOUT_S)

    def _wait_freeing_slots(self, thread: EnqueueThread, deadline: float) -> int:
        """Wait until ``deadline`` for ``thread`` to end, freeing a slot of the queue whenever it holds
        datapoints (a full queue may hold the thread in its enqueue); returns the slots freed."""
        freed = 0
        with contextlib.suppress(Exception):  # the session may be closed already
            while thread.is_alive() and time.monotonic() < deadline:
                if self._sess.run(self.size_tensor) > 0:
                    self._sess.run(self._drain_op)
                    freed += 1
                thread.join(_DRAIN_POLL_S)
        return freed

    # ---- a restart in place (towerpack.trainer.resize.input_restart) -------------------------------
    def stop_producing(self) -> int:
        """Stop the enqueue thread and drop every datapoint in the queue (prefetched, not trained on),
        keeping the queue open and the DataFlow as it is; :meth:`start_producing` starts a new thread on a
        new iteration of the DataFlow. Call it between steps. Returns how many datapoints were dropped."""
        thread = self.thread
        if thread is None:
            return 0
        thread.stop(keep_dataflow=True)
        dropped = self._wait_freeing_slots(thread, time.monotonic() + JOIN_TIMEOUT_S)
        if thread.is_alive():
            raise RuntimeError(
                f"{type(self).__name__}: the input thread did not stop within {JOIN_TIMEOUT_S:.0f} s (it "
                "waits for a datapoint of the DataFlow)"
            )
        self.raise_if_failed()  # a failed thread closed the queue: nothing can be restarted on it
        while self._sess.run(self.size_tensor) > 0:
            self._sess.run(self._drain_op)
            dropped += 1
        self.thread = None
        return dropped

    def start_producing(self) -> None:
        """Start the enqueue thread again after :meth:`stop_producing`, on a new iteration of the DataFlow
        (through the tracker the source follows now)."""
        self.start_thread(self._sess)

    def _raise_if_failed(self) -> None:
        if self.thread is not None and self.thread.error is not None:
            err = self.thread.error
            raise RuntimeError(f"{type(self).__name__}: the input thread failed: {err!r}") from err
