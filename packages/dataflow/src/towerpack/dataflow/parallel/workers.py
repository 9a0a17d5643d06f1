"""A group of worker processes that talk to their parent over ZMQ, with death detection.

The parent polls its sockets together with every worker's process sentinel when it waits, and
checks the sentinels every ``LIVENESS_CHECK_S`` while data is queued, so a worker that dies
(even by SIGKILL) is reported as :class:`DataFlowWorkerError` within a fraction of a second.

Parent and workers talk over IPC sockets in a directory only this user can enter (mode 700),
so other local users cannot connect to them (sockets in Linux's abstract namespace have no
permissions at all); ZMQ removes each socket file when its socket closes, and the directory
goes at exit. Every receiving socket drops a peer that sends a frame larger than the wire
limits allow.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing.connection
import multiprocessing.util  # registers its exit hook now, so that ours runs first
import os
import pickle
import shutil
import tempfile
import time
import traceback
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

import zmq

from ..pipeline.base import DataFlowReentrantGuard, DataFlowTerminated
from ..wire import control
from ..wire.codec import DEFAULT_LIMITS, WireLimits, decode_message, set_receive_limit
from ..wire.control import WorkerFailed
from .process import (
    ParentWatch,
    StopRequest,
    check_start_method,
    describe_exit,
    frozen_gc,
    get_mp_context,
    mask_sigint,
    single_threaded_opencv,
    stop_processes,
    worker_prologue,
)
from .stall import StallWatch, stall_warning_after

__all__ = [
    "DataFlowWorkerError",
    "Inbox",
    "WorkerGroup",
    "WorkerGroupOwner",
    "ipc_address",
    "worker_recv",
    "worker_send",
]

#: How often a blocked worker checks that its parent is still alive (ms).
LIVENESS_POLL_MS = 500
#: While data is queued the consumer never waits, so it checks its workers this often (s).
LIVENESS_CHECK_S = 0.25
#: How long to look through queued messages for the report of a worker that exited by itself (s).
REPORT_GRACE_S = 1.0
#: A worker's report keeps this many characters of the end of its traceback (headers are bounded).
MAX_TRACEBACK_CHARS = 64 << 10


class DataFlowWorkerError(RuntimeError):
    """A dataflow worker process raised an exception or died; the message holds its traceback."""


#: Longest path an IPC endpoint may have (``sun_path`` holds 108 bytes with its terminator).
_MAX_IPC_PATH = 100
_ipc_dir: tuple[int, str] | None = None


def _private_dir() -> str:
    """This process's directory for IPC sockets: mode 700, on local disk, removed at exit."""
    global _ipc_dir
    if _ipc_dir is None or _ipc_dir[0] != os.getpid():
        base = tempfile.gettempdir()
        if len(base) > 40 or not os.access(base, os.W_OK):  # keep endpoint paths short
            base = "/tmp"
        path = tempfile.mkdtemp(prefix="towerpack-ipc-", dir=base)  # created with mode 700
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        _ipc_dir = (os.getpid(), path)
    return _ipc_dir[1]


def ipc_address(name: str) -> str:
    """A fresh IPC endpoint in this process's private directory, which only this user can enter."""
    path = os.path.join(_private_dir(), f"{name[:24]}-{uuid.uuid4().hex[:12]}")
    if len(path) > _MAX_IPC_PATH:
        raise RuntimeError(f"IPC socket path {path} is too long; set TMPDIR to a shorter directory")
    return f"ipc://{path}"


def worker_send(sock: zmq.Socket, frames: list, watch: ParentWatch) -> None:
    """Send without copying; while the parent is not reading, keep checking that it is alive."""
    # Checking EVENTS first is cheaper than a poll, and than a failed non-blocking send.
    while not sock.get(zmq.EVENTS) & zmq.POLLOUT and not sock.poll(LIVENESS_POLL_MS, zmq.POLLOUT):
        if not watch.alive():
            os._exit(0)
    sock.send_multipart(frames, copy=False)


def worker_recv(sock: zmq.Socket, watch: ParentWatch) -> list:
    """Receive frames; exit quietly if the parent disappears while waiting."""
    while not sock.poll(LIVENESS_POLL_MS, zmq.POLLIN):
        if not watch.alive():
            os._exit(0)
    return sock.recv_multipart(copy=False)


def report_worker_error(sock: zmq.Socket, index: int) -> None:
    """Ship the current exception's traceback to the parent (as text: no pickle on the socket)."""
    text = traceback.format_exc()
    if len(text) > MAX_TRACEBACK_CHARS:
        text = "...\n" + text[-MAX_TRACEBACK_CHARS:]
    with contextlib.suppress(zmq.ZMQError):
        sock.send_multipart(control.encode(WorkerFailed(index, os.getpid(), text)))
    sock.setsockopt(zmq.LINGER, 2000)  # let the report reach the parent before the context closes


_live_groups: weakref.WeakSet[WorkerGroup] = weakref.WeakSet()


def _stop_live_groups() -> None:
    for group in list(_live_groups):
        group.stop()


def _bootstrap(
    target: Callable[..., None], parent_pid: int, stop: StopRequest, index: int, args: tuple
) -> None:
    watch = worker_prologue(parent_pid, stop)
    target(watch, index, *args)


class WorkerGroup:
    """Start ``len(args_list)`` processes running ``target(watch, index, *args)``; stop and reap them."""

    def __init__(
        self,
        target: Callable[..., None],
        args_list: Sequence[tuple],
        name: str,
        start_method: str | None = None,
    ) -> None:
        self.name = name
        ctx = get_mp_context(start_method)
        self.start_method = ctx.get_start_method()
        parent = os.getpid()
        self._stop_request = StopRequest(ctx)
        self.procs = [
            ctx.Process(
                target=_bootstrap, args=(target, parent, self._stop_request, i, args), name=f"{name}-{i}"
            )
            for i, args in enumerate(args_list)
        ]
        self.sentinels: dict[int, int] = {}
        self.stopped = False
        self._check_at = 0.0

    def start(self) -> None:
        # multiprocessing joins its children at exit; ours must be stopped before that, so this
        # hook is (re-)registered last, and atexit runs the last registered hook first.
        _live_groups.add(self)
        atexit.unregister(_stop_live_groups)
        atexit.register(_stop_live_groups)
        lean = frozen_gc() if self.start_method == "fork" else contextlib.nullcontext()
        with mask_sigint(), lean, single_threaded_opencv():
            for i, p in enumerate(self.procs):
                try:
                    p.start()
                except (pickle.PicklingError, TypeError, AttributeError) as e:
                    if self.start_method == "fork":
                        raise
                    self.stop()
                    raise RuntimeError(
                        f"{self.name}: cannot start workers with the {self.start_method!r} start method "
                        f"because the dataflow cannot be pickled ({e}). Make the dataflow picklable, or "
                        "use start_method='fork' (the default), which needs no pickling."
                    ) from None
                self.sentinels[p.sentinel] = i

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs if p.pid is not None]

    def register(self, poller: zmq.Poller) -> None:
        for fd in self.sentinels:
            poller.register(fd, zmq.POLLIN)

    def dead_worker(self) -> int | None:
        """The index of a worker that has exited, looked for at most every ``LIVENESS_CHECK_S``."""
        now = time.monotonic()
        if now < self._check_at:
            return None
        self._check_at = now + LIVENESS_CHECK_S
        ready = multiprocessing.connection.wait(list(self.sentinels), 0)
        return self.sentinels[ready[0]] if ready else None

    def exitcode(self, index: int) -> int | None:
        p = self.procs[index]
        p.join(0.1)
        return p.exitcode

    def describe(self) -> str:
        """The workers and whether they are alive: ``"2 worker processes (pids 11, 12), all alive"``."""
        n = len(self.procs)
        what = f"{n} worker process{'es' if n != 1 else ''} (pid{'s' if n != 1 else ''} "
        what += ", ".join(str(p.pid) for p in self.procs) + ")"
        gone = [(i, p) for i, p in enumerate(self.procs) if p.pid is not None and p.exitcode is not None]
        if not gone:
            return f"{what}, all alive"
        return f"{what}: " + "; ".join(f"worker {i} {describe_exit(p.exitcode)}" for i, p in gone)

    def died_error(self, index: int) -> DataFlowWorkerError:
        p = self.procs[index]
        return DataFlowWorkerError(
            f"{self.name} worker {index} (pid {p.pid}) {describe_exit(self.exitcode(index))} "
            "without reporting an error"
        )

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            stop_processes([p for p in self.procs if p.pid is not None], stop=self._stop_request)


def raise_if_error(msg: Any, group_name: str) -> Any:
    """Turn a worker's :class:`WorkerFailed` report into :class:`DataFlowWorkerError`; pass others through."""
    if isinstance(msg, WorkerFailed):
        raise DataFlowWorkerError(
            f"{group_name} worker {msg.worker} (pid {msg.pid}) raised an exception:\n{msg.traceback}"
        )
    return msg


def worker_died(sock: zmq.Socket, group: WorkerGroup, index: int, allow_pickle: bool) -> DataFlowWorkerError:
    """The error for worker ``index``, which exited: the traceback it reported, or how it died."""
    exitcode = group.exitcode(index)
    if exitcode is not None and exitcode >= 0:
        # It exited by itself, so it sent a report first, queued behind what it and the others
        # sent before. Other workers keep sending, so the search is bounded in time.
        deadline = time.monotonic() + REPORT_GRACE_S
        while (left := deadline - time.monotonic()) > 0 and sock.poll(int(left * 1000) + 1, zmq.POLLIN):
            raise_if_error(decode_message(sock.recv_multipart(copy=False), allow_pickle), group.name)
    return group.died_error(index)


@dataclass
class _Resources:
    """What a runner releases when it is closed or collected (its finalizer holds this, not the runner)."""

    ctx: zmq.Context
    inbox: Inbox
    group: WorkerGroup | None = None
    socks: list[zmq.Socket] = field(default_factory=list)

    def release(self) -> None:
        if self.group is not None:
            self.group.stop()
        for s in self.socks:
            s.close(linger=0)
        self.inbox.close()
        self.ctx.term()


class WorkerGroupOwner:
    """The lifecycle of a dataflow that runs a :class:`WorkerGroup` whose workers send to an :class:`Inbox`.

    The dataflow calls :meth:`_configure_workers` in ``__init__``; its ``reset_state`` calls
    :meth:`_open_inbox`, makes the sockets of its own with :meth:`_socket`, and ends with
    :meth:`_start_workers`; its ``__iter__`` runs in :meth:`_iterating`. Its users get the workers'
    pids, ``close`` (which also runs when the dataflow is garbage-collected) and the context manager.
    Waiting for the workers in the inbox is watched: a long wait for a datapoint logs a warning
    (:mod:`towerpack.dataflow.parallel.stall`).
    """

    _group: WorkerGroup | None = None

    @property
    def started(self) -> bool:
        """Whether its workers were started (``reset_state`` ran)."""
        return self._group is not None

    _finalizer: weakref.finalize | None = None

    def _configure_workers(
        self, start_method: str | None, allow_pickle: bool, limits: WireLimits, stall_warning: float | None
    ) -> None:
        check_start_method(start_method)
        self.start_method = start_method
        self.allow_pickle = allow_pickle
        self.limits = limits
        #: Seconds waited for a datapoint before a warning (see :mod:`towerpack.dataflow.parallel.stall`).
        self.stall_warning = stall_warning_after(stall_warning, f"{type(self).__name__}: stall_warning")
        self._guard = DataFlowReentrantGuard()

    def _open_inbox(self, count: int, hwm: int, name: str) -> Inbox:
        """The first step of ``reset_state``: the ZMQ context and the sockets the workers send to."""
        if self._finalizer is not None:
            raise RuntimeError(f"{type(self).__name__}.reset_state() was already called; create a new one")
        ctx = zmq.Context()
        try:
            inbox = Inbox(
                ctx, count, hwm, name, self.allow_pickle, self.limits, type(self).__name__, self.stall_warning
            )
        except BaseException:
            ctx.destroy(linger=0)
            raise
        self._ctx, self._inbox = ctx, inbox
        self._resources = _Resources(ctx, inbox)
        self._finalizer = weakref.finalize(self, self._resources.release)
        return inbox

    def _socket(self, kind: int) -> zmq.Socket:
        """A socket of the dataflow's own (``LINGER`` 0), closed with the others."""
        sock = self._ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        self._resources.socks.append(sock)
        return sock

    def _start_workers(self, target: Callable[..., None], args_list: Sequence[tuple]) -> None:
        """The last step of ``reset_state``: start the workers, ``target(watch, index, *args)`` each."""
        group = WorkerGroup(target, args_list, type(self).__name__, self.start_method)
        self._inbox.group = self._resources.group = self._group = group
        group.start()

    @contextlib.contextmanager
    def _iterating(self) -> Iterator[None]:
        """Around an iteration: refuse to iterate before ``reset_state``, or from two threads at once."""
        if self._group is None:
            raise RuntimeError(f"{type(self).__name__}: call reset_state() before iterating")
        with self._guard:
            self._inbox.stall.restart()  # the time the caller spent before this iteration is no wait
            yield

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the workers (empty before ``reset_state``)."""
        return self._group.pids if self._group is not None else []

    def close(self) -> None:
        """Stop and reap the workers and release the sockets; iterating afterwards raises."""
        if self._finalizer is not None:
            self._finalizer()

    def _forget_workers(self) -> None:
        """:meth:`close`, and forget the workers, so that ``reset_state`` may start new ones."""
        self.close()
        self._finalizer = None
        self._group = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Inbox:
    """The parent's receiving sockets of a worker group: one per worker, or one that all share.

    :meth:`recv` takes the next message from the sockets it is asked to read, in turn, and
    raises :class:`DataFlowWorkerError` when a worker reported an error or died. Its
    :class:`StallWatch` times the waits for datapoints.
    """

    def __init__(
        self,
        ctx: zmq.Context,
        count: int,
        hwm: int,
        name: str,
        allow_pickle: bool = False,
        limits: WireLimits = DEFAULT_LIMITS,
        owner: str | None = None,
        stall_warning: float | None = None,
    ) -> None:
        self.group: WorkerGroup | None = None  # the workers that send here, set once they exist
        self.stall = StallWatch(owner or name, self.describe_workers, stall_warning_after(stall_warning))
        self.allow_pickle = allow_pickle
        self.limits = limits
        self.socks: list[zmq.Socket] = []
        self.addrs: list[str] = []
        for _ in range(count):
            sock = ctx.socket(zmq.PULL)
            self.socks.append(sock)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.RCVHWM, hwm)
            set_receive_limit(sock, limits)
            addr = ipc_address(name)
            sock.bind(addr)
            self.addrs.append(addr)
        self._all = list(range(count))
        self._turn = 0
        self._pollers: dict[tuple[int, ...], tuple[zmq.Poller, dict]] = {}

    def close(self) -> None:
        for s in self.socks:
            s.close(linger=0)

    def _decode(self, index: int, frames: list) -> tuple[int, Any]:
        return index, raise_if_error(decode_message(frames, self.allow_pickle, self.limits), self.group.name)

    def describe_workers(self) -> str:
        return self.group.describe() if self.group is not None else "workers (not started)"

    def _sock_of(self, worker: int) -> zmq.Socket:
        return self.socks[0] if len(self.socks) == 1 else self.socks[worker]

    def recv(self, active: Sequence[int] | None = None) -> tuple[int, Any]:
        """``(socket index, message)`` of the next message on the ``active`` sockets (default: all)."""
        index, msg = self._next(active)
        self.stall.got(msg)
        return index, msg

    def _next(self, active: Sequence[int] | None) -> tuple[int, Any]:
        group = self.group
        if group.stopped:
            raise DataFlowTerminated(f"{group.name} was closed")
        dead = group.dead_worker()
        if dead is not None:
            raise worker_died(self._sock_of(dead), group, dead, self.allow_pickle)
        active = self._all if active is None else active
        if not active:
            raise RuntimeError(f"{group.name}: no worker to receive from")
        n = len(active)
        for k in range(n):  # fast path: a message is already queued on one of them
            i = active[(self._turn + k) % n]
            try:
                frames = self.socks[i].recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                continue
            self._turn = (self._turn + k + 1) % n
            return self._decode(i, frames)
        poller, by_sock = self._poller(tuple(active))
        self.stall.waiting()
        while True:
            events = dict(poller.poll(self.stall.timeout_ms()))
            for sock, i in by_sock.items():
                if events.get(sock):
                    return self._decode(i, sock.recv_multipart(copy=False))
            for fd in events:
                if fd in group.sentinels:
                    dead = group.sentinels[fd]
                    raise worker_died(self._sock_of(dead), group, dead, self.allow_pickle)
            if not events:
                self.stall.check()

    def _poller(self, active: tuple[int, ...]) -> tuple[zmq.Poller, dict]:
        """A poller over the ``active`` sockets and every worker's sentinel (made once per set)."""
        cached = self._pollers.get(active)
        if cached is None:
            poller = zmq.Poller()
            for i in active:
                poller.register(self.socks[i], zmq.POLLIN)
            self.group.register(poller)
            cached = self._pollers[active] = (poller, {self.socks[i]: i for i in active})
        return cached
