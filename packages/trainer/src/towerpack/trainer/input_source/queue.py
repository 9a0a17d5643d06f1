"""QueueInput: a Python thread moves DataFlow datapoints into a TF FIFOQueue the graph dequeues from."""

from __future__ import annotations

import contextlib
import threading

from ..callbacks.base import Callback
from ..compat import tf, tfv1
from .base import FeedfreeInput
from .utils import DatapointChecker, logger, placeholders_for, repeat_forever

__all__ = ["EnqueueThread", "QueueInput"]

#: Seconds ``after_train`` waits for the enqueue thread (it is a daemon thread either way).
JOIN_TIMEOUT_S = 5.0


class EnqueueThread(threading.Thread):
    """Iterates a DataFlow forever and enqueues every datapoint with ``sess``.

    Stops when ``stop()`` is called or the queue is closed; any other error is kept in ``error``,
    logged, and the queue is closed so that the consumer does not wait forever.
    """

    def __init__(self, source: QueueInput, sess):
        super().__init__(name=f"{type(source).__name__}-enqueue", daemon=True)
        self._source = source
        self._sess = sess
        self._stop_event = threading.Event()
        self.error: BaseException | None = None

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        src = self._source
        enqueue = self._sess.make_callable(src._enqueue_op, feed_list=src._placeholders)
        check = DatapointChecker(src._input_signature, type(src).__name__)
        try:
            for dp in src._datapoints(self._stop_event):
                if self._stop_event.is_set():
                    return
                enqueue(*check(dp))
        except (tf.errors.CancelledError, tf.errors.OutOfRangeError):
            pass  # the queue was closed: training is over
        except Exception as e:
            if self._stop_event.is_set() or _session_closed(e):
                return
            self.error = e  # recorded before the queue closes: a reader woken by the close sees it
            logger.error("%s: the input thread failed, closing the queue", type(src).__name__, exc_info=True)
            src._close_queue(self._sess)
        finally:
            close = getattr(src.ds, "close", None)
            if callable(close):
                close()


def _session_closed(e: BaseException) -> bool:
    return isinstance(e, RuntimeError) and "closed Session" in str(e)


class _QueueCallback(Callback):
    """Starts the enqueue thread, reports the queue's fill level, closes the queue after training."""

    _chief_only = False
    #: Sample the queue size every this many steps (one extra tiny fetch).
    SIZE_EVERY = 20

    def __init__(self, source: QueueInput):
        self._source = source
        self._size_ema = None
        self._runs = 0

    def _before_train(self) -> None:
        self._source._start_thread(getattr(self.trainer, "sess", None) or tfv1.get_default_session())

    def _before_run(self, ctx):
        self._source.raise_if_failed()
        self._runs += 1
        if self._runs % self.SIZE_EVERY == 0:
            return [self._source._size_op]
        return None

    def _after_run(self, run_context, run_values) -> None:
        if run_values.results:
            size = float(run_values.results[0])
            self._size_ema = size if self._size_ema is None else 0.9 * self._size_ema + 0.1 * size

    def _trigger_epoch(self) -> None:
        monitors = getattr(self.trainer, "monitors", None)
        if self._size_ema is not None and monitors is not None:
            monitors.put_scalar(f"{type(self._source).__name__}/queue_size", self._size_ema)

    def _after_train(self) -> None:
        self._source._stop_thread()


class QueueInput(FeedfreeInput):
    """Prefetch datapoints of a DataFlow into a ``FIFOQueue(50)`` from a background thread.

    The training step dequeues without a feed_dict, so the Python data loading overlaps with
    the computation. Every ``get_input_tensors`` call makes a new dequeue, so several towers
    each read their own batch. The fill level (``QueueInput/queue_size``, 0..capacity) goes to
    the monitors at every epoch: near capacity means the input keeps up, near 0 means training
    waits for data.
    """

    def __init__(self, ds, queue=None):
        for attr in ("__iter__", "reset_state"):
            if not hasattr(ds, attr):
                raise TypeError(f"{type(self).__name__} takes a DataFlow (with {attr}), not {ds!r}")
        self.ds = ds
        self.queue = queue
        self._thread: EnqueueThread | None = None
        self._sess = None
        self._ds_was_reset = False

    def _size(self) -> int:
        return len(self.ds)

    def _setup(self, input_signature) -> None:
        self._placeholders = placeholders_for(input_signature)
        dtypes = [p.dtype for p in self._placeholders]
        with tf.device("/cpu:0"):
            if self.queue is None:
                self.queue = tfv1.FIFOQueue(50, dtypes, name="input_queue")
            elif list(self.queue.dtypes) != dtypes:
                raise ValueError(f"the queue's dtypes {self.queue.dtypes} do not match the inputs' {dtypes}")
            self._enqueue_op = self.queue.enqueue(self._placeholders, name="enqueue")
            self._close_op = self.queue.close(cancel_pending_enqueues=True, name="close")
            self._size_op = self.queue.size(name="queue_size")
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

    def _datapoints(self, stop_event: threading.Event):
        """The endless stream of datapoints the enqueue thread moves into the queue."""
        return repeat_forever(self.ds)

    def _reset_state(self) -> None:
        # The DataFlow is reset once; the thread streams it endlessly, so a later reset (an
        # inference pass) just continues the stream, which stays aligned when every pass
        # consumes exactly size() datapoints.
        if not self._ds_was_reset:
            self.ds.reset_state()
            self._ds_was_reset = True

    # ---- thread management ---------------------------------------------------------------------
    def _start_thread(self, sess) -> None:
        if sess is None:
            raise RuntimeError(f"{type(self).__name__}: no session to run the enqueue thread with")
        if self._thread is not None:
            raise RuntimeError(f"{type(self).__name__} was already started")
        self._sess = sess
        self._thread = EnqueueThread(self, sess)
        self._thread.start()

    def _raise_if_failed(self) -> None:
        if self._thread is not None and self._thread.error is not None:
            err = self._thread.error
            raise RuntimeError(f"{type(self).__name__}: the input thread failed: {err!r}") from err

    def _close_queue(self, sess) -> None:
        # The session may be gone already; the thread is a daemon either way.
        with contextlib.suppress(Exception):
            sess.run(self._close_op)

    def _stop_thread(self) -> None:
        if self._thread is None:
            return
        self._thread.stop()
        self._close_queue(self._sess)
        self._thread.join(JOIN_TIMEOUT_S)
        if self._thread.is_alive():
            name = type(self).__name__
            logger.warning("%s: the input thread did not stop within %.0f s", name, JOIN_TIMEOUT_S)
