"""Parallel map: MultiProcessMapDataZMQ and MultiProcessMapAndBatchDataZMQ (processes over ZMQ),
MultiThreadMapData (threads).

All three warn when they wait long for a result (:mod:`towerpack.dataflow.parallel.stall`): a map function
that hangs, or one that returns ``None`` for everything, never makes a silent wait.
"""

from __future__ import annotations

import itertools
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import zmq

from ..pipeline.base import DataFlow, DataFlowReentrantGuard, LengthUnknownError, ProxyDataFlow, dataflow_len
from ..pipeline.batch import aggregate_batch
from ..pipeline.stream import repeat_forever
from ..resume.keys import join, join_all
from ..resume.protocol import Batch, Step
from ..wire import control
from ..wire.codec import DEFAULT_LIMITS, WireLimits, decode, encode, set_receive_limit
from ..wire.control import NoResult
from .process import ParentWatch
from .stall import StallWatch, stall_warning_after
from .workers import WorkerGroupOwner, ipc_address, report_worker_error, worker_recv, worker_send

__all__ = [
    "MultiProcessMapAndBatchData",
    "MultiProcessMapAndBatchDataZMQ",
    "MultiProcessMapData",
    "MultiProcessMapDataZMQ",
    "MultiThreadMapData",
    "ThreadedMapData",
]


def _none_result(strict: bool) -> None:
    if strict:
        raise ValueError(
            "map_func returned None, which is not allowed with strict=True "
            "(every datapoint must be mapped exactly once)"
        )


_NO_RESULT_MESSAGE = NoResult()
_NO_RESULT = control.encode(_NO_RESULT_MESSAGE)


def _map_worker(
    watch: ParentWatch,
    index: int,
    map_func: Callable[[Any], Any],
    task_addr: str,
    result_addr: str,
    hwm: int,
    allow_pickle: bool,
    limits: WireLimits,
    tagging: bool = False,
) -> None:
    ctx = zmq.Context()
    tasks = ctx.socket(zmq.PULL)
    results = ctx.socket(zmq.PUSH)
    for s in (tasks, results):
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.SNDHWM, hwm)
        s.setsockopt(zmq.RCVHWM, hwm)
    set_receive_limit(tasks, limits)
    tasks.connect(task_addr)
    results.connect(result_addr)
    try:
        while True:
            dp = decode(worker_recv(tasks, watch), allow_pickle, limits)
            if tagging:  # [tag, datapoint] -> [tag, result], or [tag] for no result
                tag, dp = dp
                out = map_func(dp)
                worker_send(results, encode([tag] if out is None else [tag, out], allow_pickle), watch)
                continue
            out = map_func(dp)
            worker_send(results, _NO_RESULT if out is None else encode(out, allow_pickle), watch)
    except Exception:
        report_worker_error(results, index)
    finally:
        tasks.close()
        results.close()
        ctx.term()


class MultiProcessMapDataZMQ(WorkerGroupOwner, ProxyDataFlow):
    """Apply ``map_func`` to the datapoints of ``ds`` in ``num_proc`` worker processes.

    ``ds`` is iterated in this process; its datapoints go to the workers and the results come
    back over IPC sockets in the wire format (so both must be arrays, numbers, strings, bytes,
    lists, tuples or dicts, unless ``allow_pickle``). Results arrive in completion order, not
    input order. Up to ``buffer_size`` datapoints are in flight.

    With ``strict=True`` every epoch maps each input datapoint exactly once (a ``None`` result is
    an error). Otherwise the input is repeated forever, the buffer carries over between epochs,
    an epoch is ``len(ds)`` results, and a ``None`` result drops the datapoint.

    Worker processes follow the same rules as :class:`MultiProcessRunnerZMQ` (start in
    ``reset_state``, die with this process, errors raised here with their traceback, a warning
    after ``stall_warning`` seconds of waiting for a result).
    """

    def __init__(
        self,
        ds: DataFlow,
        num_proc: int,
        map_func: Callable[[Any], Any],
        buffer_size: int = 200,
        strict: bool = False,
        start_method: str | None = None,
        allow_pickle: bool = False,
        limits: WireLimits = DEFAULT_LIMITS,
        stall_warning: float | None = None,
    ) -> None:
        super().__init__(ds)
        if num_proc < 1 or buffer_size < 1:
            raise ValueError("MultiProcessMapDataZMQ: num_proc and buffer_size must be >= 1")
        if strict:
            size = dataflow_len(ds)
            if size is not None and buffer_size > size:
                buffer_size = max(size, 1)
        self.num_proc = num_proc
        self.map_func = map_func
        self.buffer_size = buffer_size
        self.strict = strict
        self._configure_workers(start_method, allow_pickle, limits, stall_warning)
        self._inflight = 0
        self._source: Iterator[Any] | None = None

    #: Tag mode (see :mod:`towerpack.dataflow.resume.tags`): tasks and results travel with their tags.
    _skipped: Any = None

    def resume_step(self) -> Step:
        why = f"{type(self).__name__} (results in completion order)"
        uncounted = None if self.strict else why
        return Step(inputs=(self.ds,), unordered=why, uncounted=uncounted, repeats=not self.strict)

    def reset_state(self) -> None:
        hwm = self.buffer_size + 10
        inbox = self._open_inbox(1, hwm, "map-result")
        self.ds.reset_state()
        task_addr = ipc_address("map-task")
        self._tasks = self._socket(zmq.PUSH)
        self._tasks.setsockopt(zmq.SNDHWM, hwm)
        self._tasks.bind(task_addr)
        tags = self._track.tags
        args = (self.map_func, task_addr, inbox.addrs[0], hwm, self.allow_pickle, self.limits, tags)
        self._start_workers(_map_worker, [args] * self.num_proc)

    def _result(self, msg: Any) -> Any:
        """A received result as the caller sees it (None: no result), its tag kept in tag mode."""
        if not self._track.tags:
            return None if isinstance(msg, NoResult) else msg
        if len(msg) == 1:
            self._skipped = join(self._skipped, msg[0])
            return None
        tag, out = msg
        if self._skipped is not None:
            tag, self._skipped = join(self._skipped, tag), None
        self.position_tag = tag
        return out

    def _send(self, dp: Any) -> None:
        if self._track.tags:
            dp = [self.ds.position_tag, dp]
        frames = encode(dp, self.allow_pickle)
        while not self._tasks.poll(200, zmq.POLLOUT):
            for i, p in enumerate(self._group.procs):
                if p.exitcode is not None:
                    raise self._group.died_error(i)
            self._inbox.stall.waiting()  # the workers take no task: that is waiting for them too
            self._inbox.stall.check()
        self._tasks.send_multipart(frames, copy=False)
        self._inflight += 1

    def _recv(self) -> Any:
        _, msg = self._inbox.recv()
        self._inflight -= 1
        return msg

    def __iter__(self) -> Iterator[Any]:
        with self._iterating():
            yield from (self._iter_strict() if self.strict else self._iter_loose())

    def _iter_strict(self) -> Iterator[Any]:
        while self._inflight:  # results of an epoch that the caller abandoned
            self._recv()
        source = iter(self.ds)
        more = True
        while True:
            while more and self._inflight < self.buffer_size:
                try:
                    dp = next(source)
                except StopIteration:
                    more = False
                    break
                self._send(dp)
            if not self._inflight:
                return
            out = self._result(self._recv())
            if out is None:
                _none_result(True)
            yield out

    def _iter_loose(self) -> Iterator[Any]:
        if self._source is None:
            self._source = repeat_forever(self.ds, allow_empty=self._track.empty_passes)
        size = dataflow_len(self.ds)
        produced = 0
        while size is None or produced < size:
            while self._inflight < self.buffer_size:
                self._send(next(self._source))
            out = self._result(self._recv())
            if out is None:
                continue
            produced += 1
            yield out


def _dispatcher(
    watch: ParentWatch,
    ds: DataFlow,
    task_addr: str,
    result_addr: str,
    hwm: int,
    allow_pickle: bool,
    tagging: bool,
    empty_passes: int | bool,
) -> None:
    ctx = zmq.Context()
    tasks = ctx.socket(zmq.PUSH)
    tasks.setsockopt(zmq.LINGER, 0)
    tasks.setsockopt(zmq.SNDHWM, hwm)
    tasks.bind(task_addr)
    try:
        ds.reset_state()
        for dp in repeat_forever(ds, allow_empty=empty_passes):  # tag mode: tasks are [tag, datapoint]
            worker_send(tasks, encode([ds.position_tag, dp] if tagging else dp, allow_pickle), watch)
    except Exception:
        report = ctx.socket(zmq.PUSH)  # errors go where the parent reads
        report.connect(result_addr)
        report_worker_error(report, 0)
        report.close()
    finally:
        tasks.close()
        ctx.term()


def _map_batch_process(
    watch: ParentWatch,
    index: int,
    ds: DataFlow,
    map_func: Callable[[Any], Any],
    batch_size: int,
    task_addr: str,
    result_addr: str,
    hwm: int,
    allow_pickle: bool,
    limits: WireLimits,
    tagging: bool = False,
    empty_passes: int | bool = False,
) -> None:
    """Process 0 dispatches the input forever; the others map, batch and send batches."""
    if index == 0:
        _dispatcher(watch, ds, task_addr, result_addr, hwm, allow_pickle, tagging, empty_passes)
        return
    ctx = zmq.Context()
    tasks = ctx.socket(zmq.PULL)
    results = ctx.socket(zmq.PUSH)
    for s in (tasks, results):
        s.setsockopt(zmq.LINGER, 0)
    tasks.setsockopt(zmq.RCVHWM, max(2, hwm // 4))
    set_receive_limit(tasks, limits)
    results.setsockopt(zmq.SNDHWM, 2)
    tasks.connect(task_addr)
    results.connect(result_addr)
    try:
        holder: list[Any] = []
        tags: list[Any] = []  # tag mode: of the datapoints in the holder, and of dropped ones
        while True:
            dp = decode(worker_recv(tasks, watch), allow_pickle, limits)
            if tagging:
                tag, dp = dp
                tags.append(tag)
            out = map_func(dp)
            if out is None:
                continue
            holder.append(out)
            if len(holder) == batch_size:
                batch = aggregate_batch(holder)
                if tagging:
                    batch = [join_all(tags), batch]
                    tags = []
                worker_send(results, encode(batch, allow_pickle), watch)
                holder = []
    except Exception:
        report_worker_error(results, index)
    finally:
        tasks.close()
        results.close()
        ctx.term()


class MultiProcessMapAndBatchDataZMQ(WorkerGroupOwner, ProxyDataFlow):
    """Map with ``map_func`` and batch by ``batch_size`` in ``num_proc`` worker processes; endless.

    A dispatcher process repeats ``ds`` forever and hands datapoints to the workers (up to
    ``buffer_size`` queued); each worker maps them (``None`` drops one), stacks ``batch_size``
    results as :class:`BatchData` does and sends the batch here, so this process only receives.
    The stream has no length and no epochs. ``buffer_size`` defaults to ``3 * batch_size`` and
    must exceed ``batch_size`` (the reference checked this before applying its default, so the
    default raised). ``stall_warning`` is :class:`MultiProcessRunnerZMQ`'s.
    """

    def __init__(
        self,
        ds: DataFlow,
        num_proc: int,
        map_func: Callable[[Any], Any],
        batch_size: int,
        buffer_size: int | None = None,
        start_method: str | None = None,
        allow_pickle: bool = False,
        limits: WireLimits = DEFAULT_LIMITS,
        stall_warning: float | None = None,
    ) -> None:
        super().__init__(ds)
        if buffer_size is None:
            buffer_size = 3 * batch_size
        if num_proc < 1 or batch_size < 1 or not batch_size < buffer_size:
            raise ValueError(
                "MultiProcessMapAndBatchDataZMQ: num_proc and batch_size must be >= 1 and "
                f"batch_size ({batch_size}) < buffer_size ({buffer_size})"
            )
        self.num_proc, self.map_func, self.batch_size, self.buffer_size = (
            num_proc,
            map_func,
            batch_size,
            buffer_size,
        )
        self._configure_workers(start_method, allow_pickle, limits, stall_warning)

    #: Tag mode (see :mod:`towerpack.dataflow.resume.tags`): a batch comes with its items' tags.

    def resume_step(self) -> Step:
        why = f"{type(self).__name__} (endless, batches in completion order)"
        return Step(
            inputs=(self.ds,), batch=Batch(self.batch_size, False), unordered=why, uncounted=why, repeats=True
        )

    def __len__(self) -> int:
        raise LengthUnknownError("MultiProcessMapAndBatchDataZMQ is endless and has no length")

    def reset_state(self) -> None:
        inbox = self._open_inbox(1, 4, "mapbatch-result")
        common = (self.ds, self.map_func, self.batch_size, ipc_address("mapbatch-task"), inbox.addrs[0])
        track = self._track
        args = (*common, self.buffer_size, self.allow_pickle, self.limits, track.tags, track.empty_passes)
        self._start_workers(_map_batch_process, [args] * (self.num_proc + 1))

    def __iter__(self) -> Iterator[Any]:
        with self._iterating():
            while True:
                _, msg = self._inbox.recv()
                if isinstance(msg, control.Message):
                    continue
                if self._track.tags:
                    self.position_tag, msg = msg
                yield msg


class MultiThreadMapData(ProxyDataFlow):
    """Apply ``map_func`` to the datapoints of ``ds`` in ``num_thread`` threads, keeping input order.

    Up to ``buffer_size`` datapoints are mapped ahead. Each epoch maps every input datapoint once;
    a ``None`` result drops the datapoint, or raises with ``strict=True``. Threads suit functions
    that release the GIL (I/O, image decoding in C); use :class:`MultiProcessMapDataZMQ` otherwise.
    A warning is logged after ``stall_warning`` seconds of waiting for a result, as in
    :class:`MultiProcessRunnerZMQ`.
    """

    def __init__(
        self,
        ds: DataFlow,
        num_thread: int,
        map_func: Callable[[Any], Any],
        buffer_size: int = 200,
        strict: bool = False,
        stall_warning: float | None = None,
    ) -> None:
        super().__init__(ds)
        if num_thread < 1 or buffer_size < 1:
            raise ValueError("MultiThreadMapData: num_thread and buffer_size must be >= 1")
        self.num_thread = num_thread
        self.map_func = map_func
        self.buffer_size = buffer_size
        self.strict = strict
        self._pool: ThreadPoolExecutor | None = None
        self._guard = DataFlowReentrantGuard()
        after = stall_warning_after(stall_warning, "MultiThreadMapData: stall_warning")
        self._stall = StallWatch(type(self).__name__, self._describe_threads, after)
        self._pending: deque[Future] = deque()

    #: Tag mode (see :mod:`towerpack.dataflow.resume.tags`): results keep their input's tag.
    _skipped: Any = None

    def resume_step(self) -> Step:
        return Step(inputs=(self.ds,))  # keeps its input's order

    def reset_state(self) -> None:
        super().reset_state()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.num_thread, thread_name_prefix="MultiThreadMapData")
            self._finalizer = weakref.finalize(self, self._pool.shutdown, wait=True, cancel_futures=True)

    def __iter__(self) -> Iterator[Any]:
        if self._pool is None:
            raise RuntimeError("MultiThreadMapData: call reset_state() before iterating")
        with self._guard:
            self._stall.restart()  # as in MultiProcessRunnerZMQ
            self._pending = pending = deque()
            tags: deque[Any] = deque()  # tag mode: the tag of each pending call
            tagging, src = self._track.tags, self.ds
            try:
                for dp in itertools.chain(self.ds, [None]):
                    if dp is not None:
                        pending.append(self._pool.submit(self.map_func, dp))
                        if tagging:
                            tags.append(src.position_tag)
                    while pending and (len(pending) >= self.buffer_size or dp is None):
                        out = self._result(pending[0])
                        pending.popleft()
                        tag = tags.popleft() if tagging else None
                        if out is None:
                            _none_result(self.strict)
                            self._skipped = join(self._skipped, tag)
                            continue
                        if tagging:
                            self.position_tag, self._skipped = join(self._skipped, tag), None
                        yield out
            finally:
                for f in pending:
                    f.cancel()

    def _result(self, future: Future) -> Any:
        """The oldest call's result; a map function that hangs is reported, not waited on silently."""
        stall = self._stall
        if not future.done():
            stall.waiting()
            while True:
                try:
                    future.result(timeout=stall.timeout())
                    break
                except FutureTimeout:
                    stall.check()
        out = future.result()
        stall.got(_NO_RESULT_MESSAGE if out is None else out)  # a dropped datapoint is no datapoint
        return out

    def _describe_threads(self) -> str:
        running = sum(f.running() for f in self._pending)
        stuck = ": map_func has not returned" if running else ""
        return (
            f"{self.num_thread} thread{'s' if self.num_thread != 1 else ''} ({len(self._pending)} map_func "
            f"calls pending, {running} of them running{stuck})"
        )

    def close(self) -> None:
        """Shut the thread pool down (waiting for running calls)."""
        if self._pool is not None:
            self._finalizer()
            self._pool = None


# The old names in the reference API.
MultiProcessMapData = MultiProcessMapDataZMQ
MultiProcessMapAndBatchData = MultiProcessMapAndBatchDataZMQ
ThreadedMapData = MultiThreadMapData
