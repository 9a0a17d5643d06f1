"""Run a model over a whole DataFlow: in this process, or over several worker processes.

``get_result()`` yields the outputs of one datapoint at a time; ``get_all_result()`` returns them
all in a list.
"""

from __future__ import annotations

import heapq
import os
import pickle
import queue
import threading
from multiprocessing import connection as mp_connection

from towerpack.dataflow.pipeline.progress import progress_bar

from ..compat import tf
from .base import OfflinePredictor
from .concurrency import _SPAWN, DIE, FAILED, MultiProcessQueuePredictWorker, PipeEnd
from .config import PredictConfig

__all__ = ["DatasetPredictorBase", "MultiProcessDatasetPredictor", "SimpleDatasetPredictor"]


def _size(dataset) -> int:
    try:
        return len(dataset)
    except (TypeError, NotImplementedError):
        return 0


class DatasetPredictorBase:
    """Predicts over ``dataset`` (a DataFlow whose datapoints are the model's inputs) with
    ``config`` (a PredictConfig)."""

    def __init__(self, config: PredictConfig, dataset):
        if not isinstance(config, PredictConfig):
            raise TypeError(f"{type(self).__name__} takes a PredictConfig, got {type(config).__name__}")
        for attr in ("__iter__", "reset_state"):
            if not hasattr(dataset, attr):
                raise TypeError(f"{type(self).__name__} takes a DataFlow (with {attr}), not {dataset!r}")
        self.config = config
        self.dataset = dataset

    def get_result(self):
        """A generator of the outputs of each datapoint."""
        raise NotImplementedError

    def get_all_result(self) -> list:
        """The outputs of every datapoint, in a list."""
        return list(self.get_result())


class SimpleDatasetPredictor(DatasetPredictorBase):
    """One ``OfflinePredictor`` in this process, called on every datapoint in order."""

    def __init__(self, config: PredictConfig, dataset):
        super().__init__(config, dataset)
        self.predictor = OfflinePredictor(config)

    def get_result(self):
        self.dataset.reset_state()
        size = _size(self.dataset)
        with progress_bar(total=size, disable=size == 0) as bar:
            for dp in self.dataset:
                yield self.predictor(*dp)
                bar.update()


def _gpu_ids(nr_proc: int) -> list[str]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [g.strip() for g in visible.split(",") if g.strip()]
    else:
        ids = [str(k) for k in range(len(tf.config.list_physical_devices("GPU")))]
    if len(ids) < nr_proc:
        where = f"CUDA_VISIBLE_DEVICES={visible}" if visible is not None else "CUDA_VISIBLE_DEVICES unset"
        raise ValueError(
            f"MultiProcessDatasetPredictor(nr_proc={nr_proc}, use_gpu=True) needs {nr_proc} GPUs, "
            f"{len(ids)} visible ({where}); use fewer processes or use_gpu=False"
        )
    return ids[:nr_proc]


class _Sender:
    """Writes to a pipe from a thread of its own: ``put`` never blocks."""

    def __init__(self, conn, name: str):
        self._conn = conn
        self._items: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=f"{name}-sender", daemon=True)
        self._thread.start()

    def put(self, item) -> None:
        self._items.put(item)

    def _run(self) -> None:
        while (item := self._items.get()) is not _STOP:
            try:
                self._conn.send(item)
            except OSError:  # the worker is gone; the reader finds out from its exit
                return

    def close(self) -> None:
        self._items.put(_STOP)
        self._thread.join(5.0)
        self._conn.close()


_STOP = object()


class MultiProcessDatasetPredictor(DatasetPredictorBase):
    """``nr_proc`` worker processes, each with an ``OfflinePredictor`` on one GPU (``use_gpu``,
    taken from ``CUDA_VISIBLE_DEVICES`` or the visible GPUs) or on the CPU, share the datapoints.
    With ``ordered`` the outputs come in the dataset's order, else as they are ready.

    Workers are spawned: ``config`` is pickled to them, so its model (or tower function) must be
    importable by module path; scripts that use this need the ``if __name__ == "__main__":``
    guard. Each worker has pipes of its own and at most ``PREFETCH`` datapoints in flight. A
    worker that fails or dies ends the iteration with a RuntimeError; leaving the generator
    early ends the workers.
    """

    #: Datapoints sent ahead to each worker.
    PREFETCH = 2

    def __init__(
        self, config: PredictConfig, dataset, nr_proc: int, use_gpu: bool = True, ordered: bool = True
    ):
        super().__init__(config, dataset)
        if nr_proc < 1:
            raise ValueError(f"nr_proc must be at least 1, got {nr_proc}")
        try:
            pickle.dumps(config)
        except Exception as e:
            raise TypeError(
                "MultiProcessDatasetPredictor sends the PredictConfig to worker processes, so it must be "
                f"picklable (a ModelDesc or tower function defined at module level): {e}"
            ) from e
        self.nr_proc = int(nr_proc)
        self.ordered = ordered
        self._devices = _gpu_ids(self.nr_proc) if use_gpu else [""] * self.nr_proc

    def _start_workers(self):
        """Spawned workers, each with a task pipe (written by a thread of ours, so that a large
        task never blocks reading a large result) and a result pipe."""
        from towerpack.dataflow.parallel.process import mask_sigint

        workers, senders, results = [], [], []
        for k, device in enumerate(self._devices):
            task_out, task_in = _SPAWN.Pipe(duplex=False)
            result_out, result_in = _SPAWN.Pipe(duplex=False)
            worker = MultiProcessQueuePredictWorker(k, PipeEnd(task_out), PipeEnd(result_in), self.config)
            # The child reads CUDA_VISIBLE_DEVICES when it imports TensorFlow, after spawning.
            old = os.environ.get("CUDA_VISIBLE_DEVICES")
            os.environ["CUDA_VISIBLE_DEVICES"] = device
            try:
                with mask_sigint():
                    worker.start()
            finally:
                if old is None:
                    del os.environ["CUDA_VISIBLE_DEVICES"]
                else:
                    os.environ["CUDA_VISIBLE_DEVICES"] = old
                task_out.close()
                result_in.close()
            workers.append(worker)
            senders.append(_Sender(task_in, worker.name))
            results.append(result_out)
        return workers, senders, results

    def get_result(self):
        from towerpack.dataflow.parallel.process import stop_processes

        workers, senders, conns = self._start_workers()
        tasks = enumerate(self.dataset)
        inflight = dict.fromkeys(range(self.nr_proc), 0)
        live = set(range(self.nr_proc))
        exhausted = False
        pending: list = []  # (task id, outputs) waiting for earlier ids, when ordered
        expected = 0

        def feed(k: int) -> None:
            nonlocal exhausted
            while not exhausted and inflight[k] < self.PREFETCH:
                task = next(tasks, None)
                if task is None:
                    exhausted = True
                    break
                senders[k].put(task)
                inflight[k] += 1
            if exhausted and inflight[k] == 0:
                senders[k].put((DIE, None))
                inflight[k] = -1  # told to end

        size = _size(self.dataset)
        try:
            self.dataset.reset_state()
            for k in sorted(live):
                feed(k)
            with progress_bar(total=size, disable=size == 0) as bar:
                while live:
                    for k, (tid, out) in self._receive(workers, conns, live):
                        if tid == FAILED:
                            raise RuntimeError(f"a MultiProcessDatasetPredictor worker failed: {out}")
                        if tid == DIE:
                            live.discard(k)
                            continue
                        inflight[k] -= 1
                        feed(k)
                        bar.update()
                        if not self.ordered:
                            yield out
                            continue
                        heapq.heappush(pending, (tid, out))
                        while pending and pending[0][0] == expected:
                            yield heapq.heappop(pending)[1]
                            expected += 1
        finally:
            stop_processes(workers)  # a sender blocked on a worker's full pipe fails and ends
            for sender in senders:
                sender.close()
            for conn in conns:
                conn.close()

    @staticmethod
    def _receive(workers, conns, live):
        """``(worker index, message)`` of the workers that answered; raises if one died."""
        ready = set(mp_connection.wait([conns[k] for k in live] + [workers[k].sentinel for k in live]))
        for k in sorted(live):
            if conns[k] in ready:
                try:
                    yield k, conns[k].recv()
                    continue
                except EOFError:
                    pass
            elif workers[k].sentinel not in ready:
                continue
            workers[k].join(1.0)
            raise RuntimeError(
                f"MultiProcessDatasetPredictor: {workers[k].name} died (exit code {workers[k].exitcode})"
            )
