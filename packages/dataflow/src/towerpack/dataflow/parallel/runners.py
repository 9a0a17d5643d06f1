"""Run a dataflow in several workers and collect their datapoints: processes over ZMQ, or threads.

Every worker knows its index and the worker count
(:func:`~towerpack.dataflow.pipeline.sharding.get_worker_info`),
so readers and :class:`ShardData` inside it read only its part. When the workers' parts make up
one epoch of the input (each worker's ``len(ds)``, taken inside the worker, adds up to
``len(ds)`` here), an epoch here is exactly one pass of every worker: each worker marks the end
of its pass, and a worker that has finished waits (its datapoints held back) until all have, so
every datapoint of an epoch arrives once. Otherwise every worker runs a full copy of the input,
as in the reference: an epoch is ``len(ds)`` datapoints of the mixed streams.

A pipeline with an endless stage (``LocallyShuffleData`` without ``exact_epochs``) has no passes
to mark, and one with a stage that holds datapoints over to later passes (``BatchDataByShape``)
has passes that may yield nothing, so a runner over either counts ``len(ds)`` datapoints per epoch.
When every worker reports an empty pass while ``ds`` is not empty here (a ``BatchData`` inside
larger than each worker's share), the runner raises at its first iteration instead of waiting
forever (:mod:`towerpack.dataflow.parallel.worker_shares`); a long wait for any other reason logs a warning
(:mod:`towerpack.dataflow.parallel.stall`).

Position tracking (:class:`~towerpack.dataflow.resume.tracker.PositionTracker`): in tag mode the
workers send every datapoint with its tag and the merge stays free; replaying, the runners merge
their workers strictly round-robin instead, so that the stream is deterministic. Either way an
iteration that was abandoned mid-epoch is continued, not drained, by the next one.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

import zmq

from ..pipeline.base import DataFlow, DataFlowReentrantGuard, DataFlowTerminated, ProxyDataFlow, dataflow_len
from ..pipeline.sharding import WorkerInfo, set_worker_info
from ..pipeline.stream import repeat_forever
from ..resume.protocol import OFF, Step, StepKind, TrackMode
from ..resume.replay import Tracking
from ..wire import control
from ..wire.codec import DEFAULT_LIMITS, WireLimits, encode
from ..wire.control import EpochEnd, WorkerStarted
from .merge import Merge, MergeKind
from .process import ParentWatch
from .stall import StallWatch, stall_warning_after
from .workers import WorkerGroupOwner, report_worker_error, worker_send

__all__ = [
    "MultiProcessPrefetchData",
    "MultiProcessRunner",
    "MultiProcessRunnerZMQ",
    "MultiThreadPrefetchData",
    "MultiThreadRunner",
    "PrefetchData",
    "PrefetchDataZMQ",
]


def _worker_stream(
    ds: DataFlow,
    index: int,
    count: int,
    thread_only: bool = False,
    tracking: Tracking | None = None,
    tagging: bool = False,
) -> Iterator[Any]:
    """What a worker sends: :class:`WorkerStarted`, then datapoints with an EpochEnd after each pass.

    In tag mode a datapoint goes as ``[tag, datapoint]`` (see :mod:`towerpack.dataflow.resume.tags`).
    """
    set_worker_info(WorkerInfo(index, count), thread_only)
    ds.reset_state()
    length = dataflow_len(ds)
    yield WorkerStarted(length)
    # A worker whose share of a small dataset (or of a resumed epoch) is empty still marks its epochs.
    tracked = tracking is not None or tagging
    stream = repeat_forever(ds, mark_epochs=True, allow_empty=length == 0 or tracked)
    if tagging:
        for item in stream:
            yield item if type(item) is EpochEnd else [ds.position_tag, item]
        return
    if tracking is None:
        yield from stream
        return
    produced = 0
    for item in stream:
        if isinstance(item, EpochEnd):
            tracking.check_pass(ds, produced)
            produced = -1
        produced += 1
        yield item


def _runner_worker(
    watch: ParentWatch,
    index: int,
    ds: DataFlow,
    addrs: list[str],
    hwm: int,
    allow_pickle: bool,
    tracking: Tracking | None = None,
    tagging: bool = False,
) -> None:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, hwm)
    sock.connect(addrs[index])
    try:
        for item in _worker_stream(ds, index, len(addrs), tracking=tracking, tagging=tagging):
            frames = control.encode(item) if isinstance(item, control.Message) else encode(item, allow_pickle)
            worker_send(sock, frames, watch)
    except Exception:
        report_worker_error(sock, index)
    finally:
        sock.close()
        ctx.term()


class MultiProcessRunnerZMQ(WorkerGroupOwner, ProxyDataFlow):
    """Iterate ``ds`` in ``num_proc`` worker processes and receive their datapoints in this one.

    Worker ``i`` of ``num_proc`` iterates its own copy of ``ds`` forever, with
    ``get_worker_info()`` telling it ``(i, num_proc)``: readers and :class:`ShardData` in ``ds``
    then read only its part, and an epoch here is exactly one pass of every worker (each
    datapoint once). A ``ds`` that does not split itself runs whole in every worker, as in the
    reference: an epoch is ``len(ds)`` datapoints of the mixed streams (with ``num_proc > 1``,
    some repeated), or never ends when the length is unknown. See the module docstring.

    Workers start in :meth:`reset_state` (call it once), die with this process (death signal plus
    a parent liveness check), ignore Ctrl-C, and are stopped and reaped by :meth:`close` or at
    exit. An exception in a worker is raised here as ``DataFlowWorkerError`` with the worker's
    traceback; a worker killed by a signal is reported the same way at once. Datapoints travel
    over private IPC sockets in the wire format of :mod:`towerpack.dataflow.wire.codec` without copies;
    the received arrays are views of the received frames.

    Args:
        ds: the dataflow to run in the workers.
        num_proc: number of worker processes.
        hwm: ZMQ high-water mark (datapoints queued per worker).
        start_method: ``"fork"`` (the default, also under TensorFlow: see
            :mod:`towerpack.dataflow.parallel.process`) or ``"spawn"`` (needs a picklable ``ds``);
            ``"forkserver"`` is refused, since its workers could not die with this process.
        allow_pickle: allow datapoints that are not arrays/numbers/strings to travel pickled.
        limits: the wire limits of received messages.
        stall_warning: seconds of waiting for a datapoint before a warning is logged (again each
            time the wait doubles); default ``$TOWERPACK_DATAFLOW_STALL_WARNING`` or 60, ``inf``: never.
    """

    def __init__(
        self,
        ds: DataFlow,
        num_proc: int = 1,
        hwm: int = 50,
        start_method: str | None = None,
        allow_pickle: bool = False,
        limits: WireLimits = DEFAULT_LIMITS,
        stall_warning: float | None = None,
    ) -> None:
        super().__init__(ds)
        if num_proc < 1:
            raise ValueError(f"{type(self).__name__}: num_proc must be >= 1, got {num_proc}")
        self.num_proc = num_proc
        self.hwm = max(1, int(hwm))
        self._configure_workers(start_method, allow_pickle, limits, stall_warning)
        self._start_error: ValueError | None = None  # the workers' shares cannot work (raised again)
        self._merge = Merge(num_proc)

    def resume_step(self) -> Step:
        return Step(StepKind.RUNNER, inputs=(self.ds,), workers=self.num_proc)

    def reset_state(self) -> None:
        inbox = self._open_inbox(self.num_proc, self.hwm, "runner")
        args = (self.ds, inbox.addrs, self.hwm, self.allow_pickle, self._track.replay, self._track.tags)
        self._start_workers(_runner_worker, [args] * self.num_proc)

    def __len__(self) -> int:
        return len(self.ds)

    def reopen(self) -> None:
        """Stop the workers, dropping what they had prefetched, so that the next :meth:`reset_state`
        starts new ones: they read the process's placement and where the position tracking starts as
        they are then (an input restarted in place at another world size). Call it when no iteration is
        under way. Tracking is off until a tracker's ``start()`` switches it on again."""
        self._forget_workers()
        self._start_error = None
        self._merge = Merge(self.num_proc)
        self.track(OFF)

    def track(self, mode: TrackMode) -> None:
        super().track(mode)
        self._merge.track(mode)

    @property
    def exact(self) -> bool:
        """Whether epochs are exact (the workers split the input); known after the first iteration."""
        if self._merge.kind is None:
            self._handshake()
        return self._merge.kind is MergeKind.EXACT

    def _handshake(self) -> None:
        if self._start_error is not None:
            raise self._start_error
        lengths = []
        for i in range(self.num_proc):
            _, msg = self._inbox.recv([i])
            if not isinstance(msg, WorkerStarted):
                raise DataFlowTerminated(f"{type(self).__name__}: worker {i} did not start as expected")
            lengths.append(msg.length)
        try:
            self._merge.decide(type(self).__name__, self.ds, lengths)
        except ValueError as e:
            self._start_error = e
            self.close()  # the workers have nothing to send
            raise

    def __iter__(self) -> Iterator[Any]:
        with self._iterating():
            merge = self._merge
            if merge.kind is None:
                self._handshake()
            for dp in merge.epoch(self._inbox.recv):
                self.position_tag = merge.tag
                yield dp


class MultiProcessRunner(MultiProcessRunnerZMQ):
    """The reference's queue-based runner, with its arguments: ``num_prefetch`` datapoints in flight.

    Runs on the same core as :class:`MultiProcessRunnerZMQ` (with ``hwm = num_prefetch //
    num_proc``); datapoints that are not arrays, numbers or strings need ``allow_pickle=True``.
    """

    def __init__(self, ds: DataFlow, num_prefetch: int, num_proc: int, **kwargs: Any) -> None:
        if num_prefetch < 1:
            raise ValueError(f"MultiProcessRunner: num_prefetch must be >= 1, got {num_prefetch}")
        super().__init__(ds, num_proc=num_proc, hwm=max(1, num_prefetch // max(num_proc, 1)), **kwargs)


class _ThreadError:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class MultiThreadRunner(DataFlow):
    """Run ``num_thread`` dataflows made by ``get_df()`` in threads; datapoints through one queue.

    Thread ``i`` sees ``get_worker_info() == (i, num_thread)``, so readers and ``ShardData``
    split the input among the threads; epochs are then exact, as with
    :class:`MultiProcessRunnerZMQ` (a thread that finished its pass waits for the others). The
    length is the first flow's. Threads suit pipelines that release the GIL (I/O, decoding in C).
    ``stall_warning`` is :class:`MultiProcessRunnerZMQ`'s.
    """

    def __init__(
        self,
        get_df: Callable[[], DataFlow],
        num_prefetch: int,
        num_thread: int,
        stall_warning: float | None = None,
    ) -> None:
        if num_thread < 1 or num_prefetch < 1:
            raise ValueError("MultiThreadRunner: num_prefetch and num_thread must be >= 1")
        after = stall_warning_after(stall_warning, "MultiThreadRunner: stall_warning")
        self._stall = StallWatch(type(self).__name__, self._describe_threads, after)
        self._start_error: ValueError | None = None  # as in MultiProcessRunnerZMQ
        self.dfs = [get_df() for _ in range(num_thread)]
        self.num_thread = num_thread
        self.queue: queue.Queue = queue.Queue(maxsize=num_prefetch)
        self._stop = threading.Event()
        self._permits = [threading.Semaphore(0) for _ in range(num_thread)]
        self._threads: list[threading.Thread] = []
        self._guard = DataFlowReentrantGuard()
        self._merge = Merge(num_thread)
        self._held: list[list[Any]] = [[] for _ in range(num_thread)]  # what came before the handshake
        self._num_prefetch = num_prefetch
        self._queues: list[queue.Queue] = []  # one per thread in tracking mode

    @property
    def started(self) -> bool:
        """Whether its threads were started (``reset_state`` ran)."""
        return bool(self._threads)

    def resume_step(self) -> Step:
        # One pipeline per thread: each copy's source continues the position.
        return Step(StepKind.RUNNER, inputs=tuple(self.dfs), workers=self.num_thread)

    def __len__(self) -> int:
        return len(self.dfs[0])

    def _put(self, item: Any) -> bool:
        q = self._queues[item[0]] if self._queues else self.queue
        while not self._stop.is_set():
            try:
                q.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, index: int) -> None:
        try:
            stream = _worker_stream(
                self.dfs[index], index, self.num_thread, True, self._track.replay, self._track.tags
            )
            for item in stream:
                if not self._put((index, item)):
                    return
                if isinstance(item, EpochEnd) and self._track.replay is None:  # wait for the other threads
                    while not self._permits[index].acquire(timeout=0.2):
                        if self._stop.is_set():
                            return
        except Exception as e:
            self._put((index, _ThreadError(e)))

    def reset_state(self) -> None:
        if self._threads:
            raise RuntimeError("MultiThreadRunner.reset_state() was already called")
        if self._track.replay is not None:
            size = max(1, self._num_prefetch // self.num_thread)
            self._queues = [queue.Queue(maxsize=size) for _ in range(self.num_thread)]
        for i in range(self.num_thread):
            t = threading.Thread(target=self._run, args=(i,), name=f"MultiThreadRunner-{i}", daemon=True)
            self._threads.append(t)
            t.start()

    def _describe_threads(self) -> str:
        ended = [t.name for t in self._threads if not t.is_alive()]
        state = f"{', '.join(ended)} ended" if ended else "all alive"
        return f"{self.num_thread} thread{'s' if self.num_thread != 1 else ''}, {state}"

    def _get(self, index: int | None = None) -> tuple[int, Any]:
        q = self.queue if index is None else self._queues[index]
        stall = self._stall
        try:
            index, item = q.get_nowait()
        except queue.Empty:
            stall.waiting()
            while True:
                try:
                    index, item = q.get(timeout=stall.timeout())
                    break
                except queue.Empty:
                    stall.check()
        stall.got(item)
        if isinstance(item, _ThreadError):
            raise RuntimeError(f"MultiThreadRunner: thread {index} failed: {item.error!r}") from item.error
        return index, item

    def track(self, mode: TrackMode) -> None:
        super().track(mode)
        self._merge.track(mode)

    def __iter__(self) -> Iterator[Any]:
        if not self._threads:
            raise RuntimeError("MultiThreadRunner: call reset_state() before iterating")
        with self._guard:
            self._stall.restart()  # as in MultiProcessRunnerZMQ
            merge = self._merge
            if merge.kind is None:
                self._handshake()
            hooks = {"on_pass_end": self._let_on, "on_epoch_end": self._release}
            for dp in merge.epoch(self._next_message, **hooks):
                self.position_tag = merge.tag
                yield dp

    def _handshake(self) -> None:
        if self._start_error is not None:
            raise self._start_error
        lengths: list[Any] = [None] * self.num_thread
        seen = 0
        while seen < self.num_thread:
            index, item = self._get()
            if isinstance(item, WorkerStarted):
                lengths[index] = item.length
                seen += 1
            else:
                self._held[index].append(item)
        try:
            self._merge.decide(type(self).__name__, self.dfs[0], lengths)
        except ValueError as e:
            self._start_error = e
            self.close()
            raise

    def _next_message(self, wanted: list[int] | None) -> tuple[int, Any]:
        """The next ``(thread, item)``: from that thread's queue when replaying (one thread wanted),
        else what came before the handshake, then the shared queue (threads that ended their pass wait
        for a permit, so the exact merge need not choose)."""
        if self._queues:
            return self._get(wanted[0])
        for index, held in enumerate(self._held):
            if held:
                return index, held.pop(0)
        return self._get()

    def _let_on(self, index: int) -> None:
        self._permits[index].release()

    def _release(self) -> None:
        for p in self._permits:
            p.release()

    def close(self) -> None:
        """Stop the threads (they are daemons either way)."""
        self._stop.set()
        for q in [self.queue, *self._queues]:  # a thread waiting to put sees the stop at once
            while not q.empty():
                q.get_nowait()
        for t in self._threads:
            t.join(1.0)


# The old names in the reference API.
PrefetchDataZMQ = MultiProcessRunnerZMQ
PrefetchData = MultiProcessRunner
MultiProcessPrefetchData = MultiProcessRunner
MultiThreadPrefetchData = MultiThreadRunner
