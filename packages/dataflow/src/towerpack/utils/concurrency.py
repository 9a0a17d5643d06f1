"""Threads and processes: stoppable and pausable threads, a thread that shares a TF session, and
process hygiene (terminate children at exit, die with the parent, start without Ctrl-C).

The signal mechanics are the dataflow workers' own (:mod:`towerpack.dataflow.parallel.process`), loaded on
first use. ``ShareSessionThread`` uses the TensorFlow the process has imported; nothing here
imports it.
"""

from __future__ import annotations

import atexit
import bisect
import contextlib
import logging
import multiprocessing as mp
import os
import queue
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
    "LoopThread",
    "ShareSessionThread",
    "StoppableThread",
    "ensure_proc_terminate",
    "start_proc_mask_signal",
]

_log = logging.getLogger(__name__)

#: Seconds between two checks of the stop flag while a queue is full or empty.
QUEUE_POLL = 0.5
#: Seconds ``ensure_proc_terminate`` waits after SIGTERM before it kills.
TERMINATE_GRACE = 5.0


class StoppableThread(threading.Thread):
    """A thread with a stop flag: ``stop()`` sets it, ``stopped()`` reads it, and the queue helpers
    give up waiting once it is set.

    Args:
        evt: the ``threading.Event`` to use as the flag (one is made if None), e.g. one shared by
            several threads.
    """

    def __init__(self, evt: threading.Event | None = None) -> None:
        super().__init__()
        self._stop_evt = threading.Event() if evt is None else evt

    def stop(self) -> None:
        self._stop_evt.set()

    def stopped(self) -> bool:
        return self._stop_evt.is_set()

    def queue_put_stoppable(self, q: queue.Queue, obj: Any) -> None:
        """``q.put(obj)``, waiting while the queue is full, unless the thread is stopped first."""
        while not self.stopped():
            try:
                q.put(obj, timeout=QUEUE_POLL)
                return
            except queue.Full:
                pass

    def queue_get_stoppable(self, q: queue.Queue) -> Any:
        """``q.get()``, waiting while the queue is empty; None if the thread is stopped first."""
        while not self.stopped():
            try:
                return q.get(timeout=QUEUE_POLL)
            except queue.Empty:
                pass
        return None


class LoopThread(StoppableThread):
    """A daemon thread calling ``func()`` again and again until stopped.

    With ``pausable``, ``pause()`` holds the loop before its next call (a call under way finishes)
    and ``resume()`` lets it go on.
    """

    def __init__(self, func: Callable[[], Any], pausable: bool = True) -> None:
        super().__init__()
        self._func = func
        self._pausable = pausable
        self._running = threading.Event()
        self._running.set()
        self.daemon = True

    def run(self) -> None:
        while not self.stopped():
            if not self._running.is_set():
                self._running.wait(QUEUE_POLL)
                continue
            self._func()

    def pause(self) -> None:
        self._check_pausable()
        self._running.clear()

    def resume(self) -> None:
        self._check_pausable()
        if self._running.is_set():
            raise RuntimeError("LoopThread.resume(): the loop is not paused")
        self._running.set()

    def _check_pausable(self) -> None:
        if not self._pausable:
            raise RuntimeError("this LoopThread was made with pausable=False")


class ShareSessionThread(threading.Thread):
    """A thread that runs under the TensorFlow session that was the default when ``start()`` was called.

    Wrap a thread (``ShareSessionThread(th)``: its ``run`` runs under the session, with its name and
    daemon flag), or subclass and use ``with self.default_sess():`` in ``run``.
    """

    def __init__(self, th: threading.Thread | None = None) -> None:
        super().__init__()
        if th is not None and not isinstance(th, threading.Thread):
            raise TypeError(f"ShareSessionThread wraps a threading.Thread, got {type(th).__name__}")
        self._th = th
        self._sess = None
        if th is not None:
            self.name = th.name
            self.daemon = th.daemon

    def start(self) -> None:
        tf = sys.modules.get("tensorflow")
        self._sess = None if tf is None else tf.compat.v1.get_default_session()
        super().start()

    @contextlib.contextmanager
    def default_sess(self) -> Iterator[Any]:
        """The session as the default one inside the block (yields it; None, with a warning, if
        there was none at ``start()``)."""
        if self._sess is None:
            _log.warning("ShareSessionThread %s was started with no default session", self.name)
            yield None
            return
        with self._sess.as_default():
            yield self._sess

    def run(self) -> None:
        if self._th is None:
            raise NotImplementedError("ShareSessionThread: pass a thread to wrap, or override run()")
        with self.default_sess():
            self._th.run()


class DIE:
    """A marker put in a queue to say that a producer is done."""


def ensure_proc_terminate(proc: mp.Process | list[mp.Process]) -> None:
    """Make sure the process(es) end when this program exits: at exit, one still running is
    terminated, and killed if it has not ended ``TERMINATE_GRACE`` seconds later."""
    if isinstance(proc, list):
        for p in proc:
            ensure_proc_terminate(p)
        return
    if not isinstance(proc, mp.process.BaseProcess):
        raise TypeError(f"ensure_proc_terminate takes multiprocessing processes, got {type(proc).__name__}")
    atexit.register(_terminate, weakref.ref(proc))


def _terminate(ref: weakref.ref) -> None:
    proc = ref()
    # A forked child inherits the hook, but only the parent can stop (and test) the process.
    if proc is None or proc.pid is None or proc._parent_pid != os.getpid() or not proc.is_alive():
        return
    proc.terminate()
    proc.join(TERMINATE_GRACE)
    if proc.is_alive():
        proc.kill()
        proc.join(TERMINATE_GRACE)


def enable_death_signal(_warn: bool = True) -> bool:
    """Have the kernel send SIGHUP to this process when its parent dies (Linux; False elsewhere).

    Call it in a child process. ``_warn`` is the reference's (it warned when python-prctl was
    missing; nothing is missing here).
    """
    from towerpack.dataflow.parallel.process import enable_death_signal as set_death_signal

    return set_death_signal(signal.SIGHUP)


def is_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def mask_sigint() -> Iterator[bool]:
    """Ignore SIGINT inside the block (only possible in the main thread); yields whether it does."""
    from towerpack.dataflow.parallel.process import mask_sigint as dataflow_mask_sigint

    with dataflow_mask_sigint():
        yield is_main_thread()


def start_proc_mask_signal(proc: mp.Process | list[mp.Process]) -> None:
    """Start the process(es) with SIGINT ignored, so that a Ctrl-C in the terminal reaches only this
    program (which then stops them). From the main thread only; elsewhere they start as usual."""
    procs = proc if isinstance(proc, list) else [proc]
    with mask_sigint():
        for p in procs:
            p.start()


def subproc_call(cmd: str, timeout: float | None = None) -> tuple[bytes, int]:
    """Run a shell command; returns (its stdout and stderr, its exit code).

    The code is -1 when it timed out (the output is what it wrote until then; the command and
    everything it started are killed) and -2 when the shell could not start; failures are logged
    as warnings.
    """
    try:
        proc = subprocess.Popen(
            cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
    except OSError as e:
        _log.warning("Command '%s' could not run: %s", cmd, e)
        return b"", -2
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        _log.warning("Command '%s' timed out after %s s", cmd, timeout)
        return output, -1
    if proc.returncode != 0:
        text = output.decode(errors="replace")
        _log.warning("Command '%s' failed with exit code %d: %s", cmd, proc.returncode, text)
    return output, proc.returncode


class OrderedContainer:
    """Items put with a rank come out in rank order, each only once its predecessors have come out
    (not thread-safe)."""

    def __init__(self, start: int = 0) -> None:
        self.ranks: list[int] = []
        self.data: list[Any] = []
        self.wait_for = start

    def put(self, rank: int, val: Any) -> None:
        idx = bisect.bisect(self.ranks, rank)
        self.ranks.insert(idx, rank)
        self.data.insert(idx, val)

    def has_next(self) -> bool:
        return bool(self.ranks) and self.ranks[0] == self.wait_for

    def get(self) -> tuple[int, Any]:
        if not self.has_next():
            raise LookupError(f"OrderedContainer: item {self.wait_for} has not arrived")
        self.wait_for += 1
        return self.ranks.pop(0), self.data.pop(0)


class OrderedResultGatherProc(mp.Process):
    """A process reading ``(index, data)`` items from ``data_queue`` and putting them into
    ``result_queue`` in index order; it ends after ``nr_producer`` ``(DIE, ...)`` items."""

    def __init__(self, data_queue: mp.Queue, nr_producer: int, start: int = 0) -> None:
        super().__init__()
        self.data_queue = data_queue
        self.ordered_container = OrderedContainer(start=start)
        self.result_queue: mp.Queue = mp.Queue()
        self.nr_producer = nr_producer

    def run(self) -> None:
        ended = 0
        while ended < self.nr_producer:
            task_id, data = self.data_queue.get()
            if task_id is DIE:
                self.result_queue.put((task_id, data))
                ended += 1
                continue
            self.ordered_container.put(task_id, data)
            while self.ordered_container.has_next():
                self.result_queue.put(self.ordered_container.get())

    def get(self) -> tuple[Any, Any]:
        return self.result_queue.get()
