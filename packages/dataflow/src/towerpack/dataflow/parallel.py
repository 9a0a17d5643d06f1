"""MultiProcessRunnerZMQ: run a dataflow in several processes and collect their datapoints over ZMQ."""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Iterator
from typing import Any

import zmq

from .base import DataFlow, DataFlowReentrantGuard, ProxyDataFlow
from .process import ParentWatch, check_start_method
from .wire import encode
from .workers import WorkerGroup, ipc_address, recv_from_workers, report_worker_error, worker_send

__all__ = ["MultiProcessRunnerZMQ"]


def _runner_worker(
    watch: ParentWatch, index: int, ds: DataFlow, addr: str, hwm: int, allow_pickle: bool
) -> None:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, hwm)
    sock.connect(addr)
    try:
        ds.reset_state()
        while True:
            count = 0
            for dp in ds:
                worker_send(sock, encode(dp, allow_pickle), watch)
                count += 1
            if count == 0:
                raise RuntimeError(f"the dataflow {type(ds).__name__} produced no datapoints in an epoch")
    except Exception:
        report_worker_error(sock, index)
    finally:
        sock.close()
        ctx.term()


def _shutdown(group: WorkerGroup, sock: zmq.Socket, ctx: zmq.Context) -> None:
    group.stop()
    sock.close(linger=0)
    ctx.term()


class MultiProcessRunnerZMQ(ProxyDataFlow):
    """Iterate ``ds`` in ``num_proc`` worker processes and receive their datapoints in this one.

    Each worker iterates its own copy of ``ds`` forever (so with ``num_proc > 1`` an epoch is a
    mix of the workers' streams: datapoints may repeat or be reordered; shard the input per
    worker if that matters, or use :class:`MultiProcessMapDataZMQ` with ``strict=True``). One
    epoch here yields ``len(ds)`` datapoints, or never ends when the length is unknown.

    Workers start in :meth:`reset_state` (call it once), die with this process (death signal plus
    a parent liveness check), ignore Ctrl-C, and are stopped and reaped by :meth:`close` or at
    exit. An exception in a worker is raised here as ``DataFlowWorkerError`` with the worker's
    traceback; a worker killed by a signal is reported the same way at once. Datapoints travel
    over an IPC socket in the wire format of :mod:`towerpack.dataflow.wire` without copies; the
    received arrays are views of the received frames.

    Args:
        ds: the dataflow to run in the workers.
        num_proc: number of worker processes.
        hwm: ZMQ high-water mark (datapoints queued per worker).
        start_method: ``"fork"`` (default when no threaded framework is loaded) or ``"spawn"``
            (needs a picklable ``ds``); ``"forkserver"`` is refused, since its workers could not
            die with this process.
        allow_pickle: allow datapoints that are not arrays/numbers/strings to travel pickled.
    """

    def __init__(
        self,
        ds: DataFlow,
        num_proc: int = 1,
        hwm: int = 50,
        start_method: str | None = None,
        allow_pickle: bool = False,
    ) -> None:
        super().__init__(ds)
        if num_proc < 1:
            raise ValueError(f"MultiProcessRunnerZMQ: num_proc must be >= 1, got {num_proc}")
        self.num_proc = num_proc
        self.hwm = hwm
        check_start_method(start_method)
        self.start_method = start_method
        self.allow_pickle = allow_pickle
        self._guard = DataFlowReentrantGuard()
        self._group: WorkerGroup | None = None
        self._finalizer: weakref.finalize | None = None

    def reset_state(self) -> None:
        if self._group is not None:
            raise RuntimeError("MultiProcessRunnerZMQ.reset_state() was already called; create a new runner")
        addr = ipc_address("runner")
        args = (self.ds, addr, self.hwm, self.allow_pickle)
        group = WorkerGroup(
            _runner_worker, [args] * self.num_proc, "MultiProcessRunnerZMQ", self.start_method
        )
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.PULL)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.RCVHWM, self.hwm)
        self._sock.bind(addr)
        self._group = group
        self._finalizer = weakref.finalize(self, _shutdown, self._group, self._sock, self._ctx)
        self._group.start()
        self._poller = zmq.Poller()
        self._poller.register(self._sock, zmq.POLLIN)
        self._group.register(self._poller)

    def __len__(self) -> int:
        return len(self.ds)

    def __iter__(self) -> Iterator[Any]:
        if self._group is None:
            raise RuntimeError("MultiProcessRunnerZMQ: call reset_state() before iterating")
        with self._guard:
            try:
                size = len(self.ds)
            except NotImplementedError:
                size = None
            for _ in itertools.count() if size is None else range(size):
                yield recv_from_workers(self._sock, self._group, self._poller, self.allow_pickle)

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the workers (empty before ``reset_state``)."""
        return self._group.pids if self._group is not None else []

    def close(self) -> None:
        """Stop and reap the workers and release the socket; iterating afterwards raises."""
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> MultiProcessRunnerZMQ:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# The old name in the reference API.
PrefetchDataZMQ = MultiProcessRunnerZMQ
