"""Predictors running concurrently: threads that batch single requests over several online
predictors, and worker processes that each run an offline predictor.

Differences from the reference: calling a ``MultiThreadAsyncPredictor`` directly works (it
waits for the answer); a failing prediction fails the futures of its batch instead of killing
the thread and leaving them pending forever; ``stop()`` ends the threads. Worker processes are
spawned (not forked from a process that runs TensorFlow's threads), die with their parent, and
report an error instead of dying silently.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import threading
import traceback
from concurrent.futures import Future

import numpy as np

from .. import logger
from ..compat import tf, tfv1
from .base import AsyncPredictorBase, OfflinePredictor, OnlinePredictor

__all__ = ["MultiProcessPredictWorker", "MultiProcessQueuePredictWorker", "MultiThreadAsyncPredictor"]

#: Marks the end of a worker's input (and the worker's last output).
DIE = "__towerpack_predict_die__"
#: Marks a worker's failure: ``(FAILED, formatted traceback)``.
FAILED = "__towerpack_predict_failed__"


class MultiThreadAsyncPredictor(AsyncPredictorBase):
    """Answer single-datapoint requests with several ``OnlinePredictor``s, one thread each.

    Each thread takes a request from the shared queue (capacity ``100 * len(predictors)``),
    adds whatever else is queued up to ``batch_size`` without waiting, stacks the datapoints into
    one batch and sets every request's future to its row of the outputs.

    Args:
        predictors: OnlinePredictors with ``return_input=False``. Those without a session run in
            the default session of the thread that calls ``start()``.
        batch_size: the largest batch a thread makes.
    """

    def __init__(self, predictors, batch_size: int = 5):
        predictors = list(predictors)
        if not predictors:
            raise ValueError("MultiThreadAsyncPredictor needs at least one predictor")
        for p in predictors:
            if not isinstance(p, OnlinePredictor):
                raise TypeError(f"MultiThreadAsyncPredictor takes OnlinePredictors, got {type(p).__name__}")
            if p.return_input:
                raise ValueError("MultiThreadAsyncPredictor needs predictors with return_input=False")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.predictors = predictors
        self.batch_size = int(batch_size)
        self.input_queue: queue.Queue = queue.Queue(maxsize=100 * len(predictors))
        self._stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        if self.threads:
            raise RuntimeError("MultiThreadAsyncPredictor was already started")
        default = tfv1.get_default_session()
        if default is None and any(p.sess is None for p in self.predictors):
            raise RuntimeError(
                "Not all predictors have a session: MultiThreadAsyncPredictor.start() has to be called "
                "under a default session (`with sess.as_default():`)"
            )
        for k, p in enumerate(self.predictors):
            t = threading.Thread(
                target=self._work, args=(p, p.sess or default), name=f"PredictorWorkerThread-{k}", daemon=True
            )
            t.start()
            self.threads.append(t)

    def put_task(self, dp, callback=None) -> Future:
        if self._stop.is_set():
            raise RuntimeError("MultiThreadAsyncPredictor was stopped")
        future: Future = Future()
        if callback is not None:
            future.add_done_callback(callback)
        self.input_queue.put((list(dp), future))
        return future

    def _do_call(self, args):
        if not self.threads:
            raise RuntimeError("call start() before using the MultiThreadAsyncPredictor")
        return super()._do_call(args)

    def stop(self, timeout: float = 5.0) -> None:
        """End the threads; queued requests not yet taken are cancelled."""
        self._stop.set()
        for _ in self.threads:
            self.input_queue.put(None)
        for t in self.threads:
            t.join(timeout)
        while True:
            try:
                item = self.input_queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[1].cancel()

    def _next_batch(self):
        """Block for one request, then take queued ones up to ``batch_size`` without waiting."""
        first = self.input_queue.get()
        if first is None:
            return None
        batch = [first]
        while len(batch) < self.batch_size:
            try:
                item = self.input_queue.get_nowait()
            except queue.Empty:
                break
            if item is None:  # a stop request: put it back for another thread
                self.input_queue.put(None)
                break
            batch.append(item)
        return batch

    def _work(self, predictor: OnlinePredictor, sess) -> None:
        with sess.as_default():
            while not self._stop.is_set():
                batch = self._next_batch()
                if batch is None:
                    return
                futures = [f for _, f in batch if f.set_running_or_notify_cancel()]
                live = [dp for dp, f in batch if f in futures]
                if not futures:
                    continue
                try:
                    inputs = [np.asarray([dp[k] for dp in live]) for k in range(len(live[0]))]
                    outputs = predictor(*inputs)
                except tf.errors.CancelledError as e:
                    for f in futures:
                        f.set_exception(e)
                    logger.warning("In %s, call was cancelled.", threading.current_thread().name)
                    return
                except Exception as e:
                    for f in futures:
                        f.set_exception(e)
                    continue
                for row, f in enumerate(futures):
                    f.set_result([out[row] for out in outputs])


_SPAWN = mp.get_context("spawn")


class MultiProcessPredictWorker(_SPAWN.Process):
    """Base class of worker processes that run an ``OfflinePredictor(config)`` (built in the
    process, on the devices ``CUDA_VISIBLE_DEVICES`` leaves it). ``config`` must be picklable."""

    def __init__(self, idx: int, config):
        super().__init__(name=f"MultiProcessPredictWorker-{idx}", daemon=True)
        self.idx = idx
        self.config = config
        self.parent_pid = os.getpid()

    def _init_runtime(self) -> None:
        from towerpack.dataflow.parallel.process import worker_prologue

        worker_prologue(self.parent_pid)
        self.predictor = OfflinePredictor(self.config)


class PipeEnd:
    """One end of a ``multiprocessing`` pipe with a queue's ``get`` / ``put``."""

    def __init__(self, conn):
        self.conn = conn

    def get(self):
        return self.conn.recv()

    def put(self, item) -> None:
        self.conn.send(item)


class MultiProcessQueuePredictWorker(MultiProcessPredictWorker):
    """A worker that reads ``(task id, datapoint)`` from ``inqueue`` and writes ``(task id,
    outputs)`` to ``outqueue``; on ``(DIE, None)`` it writes ``(DIE, None)`` and exits. A failure
    writes ``(FAILED, traceback)`` instead. The queues are ``multiprocessing`` queues of the
    spawn context, or anything picklable with ``get`` and ``put`` (e.g. a ``PipeEnd``)."""

    def __init__(self, idx: int, inqueue, outqueue, config):
        super().__init__(idx, config)
        self.inqueue = inqueue
        self.outqueue = outqueue

    def run(self) -> None:
        try:
            self._init_runtime()
            while True:
                tid, dp = self.inqueue.get()
                if tid == DIE:
                    self.outqueue.put((DIE, None))
                    return
                self.outqueue.put((tid, self.predictor(*dp)))
        except Exception:
            self.outqueue.put((FAILED, f"{self.name}:\n{traceback.format_exc()}"))
