"""Process hygiene for dataflow workers: start method, death signal, parent liveness, signals.

Start method: workers are forked, also from a training process that has imported TensorFlow.
Forking needs no pickling (dataflows routinely hold lambdas, generators and open files) and
does not import TensorFlow again: a spawned worker under a training script re-imports it
(2.4 s and 260 MB of private memory per worker, measured), a forked one starts in about 40 ms.
Two things make forking a TensorFlow process sound:

- the child runs only the dataflow (Python, numpy, OpenCV, a ZMQ context of its own), never
  TensorFlow, whose thread pools it does not have and whose locks it never takes; CPython and
  glibc re-initialise their own locks (import lock, logging, malloc arenas) in the child;
- the parent freezes its garbage collector's objects while it forks (:func:`frozen_gc`), so the
  child's collector never walks the parent's objects. Walking them writes to every page that
  holds one and copy-on-write copies it: 100 MB per worker after one collection, 11 MB with
  the objects frozen (measured after ``import towerpack.trainer`` and a session run).

A dataflow that itself runs TensorFlow in its workers must use ``spawn``: pass
``start_method="spawn"`` (or set ``TOWERPACK_DATAFLOW_START_METHOD``); it needs a picklable
dataflow and a ``__main__`` guard in the script.

``forkserver`` is not supported: its workers are children of the fork server, not of the
consumer, so neither the death signal nor the parent check could tie them to the consumer.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import logging
import multiprocessing as mp
import os
import signal
import sys
import threading
from collections.abc import Iterator

logger = logging.getLogger(__name__)

__all__ = [
    "START_METHODS",
    "ParentWatch",
    "StopRequest",
    "check_start_method",
    "enable_death_signal",
    "frozen_gc",
    "get_mp_context",
    "mask_sigint",
    "single_threaded_opencv",
    "stop_processes",
]

_PR_SET_PDEATHSIG = 1
START_METHOD_VAR = "TOWERPACK_DATAFLOW_START_METHOD"
_OPENCV_THREADS_VAR = "OPENCV_FOR_THREADS_NUM"
DEFAULT_START_METHOD = "fork"
#: Start methods under which workers are children of the consumer (see the module docstring).
START_METHODS = ("fork", "spawn")


def enable_death_signal(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux only).

    Note the kernel tracks the parent *thread*: start workers from a thread that outlives them.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class ParentWatch:
    """Remembers the parent's pid at start; ``alive()`` turns false once the parent is gone."""

    def __init__(self, parent_pid: int) -> None:
        self.parent_pid = parent_pid

    def alive(self) -> bool:
        return os.getppid() == self.parent_pid


@contextlib.contextmanager
def single_threaded_opencv() -> Iterator[None]:
    """Children forked inside this context run OpenCV on one thread (and so do spawned ones).

    A worker is one unit of its runner's parallelism: OpenCV's thread pool in each of N workers
    oversubscribes the cores (2 workers decoding and augmenting JPEGs on 2 cores: 490 images/s
    with OpenCV's default threads, 900 with one each). The parent sets one thread while it forks
    and restores its own count after: a forked child must not resize a pool whose threads it did
    not inherit (``cv2.setNumThreads`` hangs there).
    """
    cv2 = sys.modules.get("cv2")
    threads = cv2.getNumThreads() if cv2 is not None else None
    env = os.environ.get(_OPENCV_THREADS_VAR)
    os.environ[_OPENCV_THREADS_VAR] = "1"  # read by an OpenCV that a child loads itself
    if cv2 is not None:
        cv2.setNumThreads(1)
    try:
        yield
    finally:
        if cv2 is not None:
            cv2.setNumThreads(threads)
        if env is None:
            os.environ.pop(_OPENCV_THREADS_VAR, None)
        else:
            os.environ[_OPENCV_THREADS_VAR] = env


#: Signals a scheduler sends to every process of a job (Slurm's ``scancel --signal``, ``--signal=USR1@T``):
#: they are meant for the training process, which stops its workers itself.
_JOB_WIDE_SIGNALS = (signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP)


class StopRequest:
    """A flag the parent shares with its workers and sets just before it sends them SIGTERM.

    Shared memory made before the workers start, so it reaches forked and spawned workers alike.
    """

    def __init__(self, ctx: mp.context.BaseContext) -> None:
        self._flag = ctx.RawValue(ctypes.c_bool, False)

    def set(self) -> None:
        self._flag.value = True

    def is_set(self) -> bool:
        return bool(self._flag.value)


def worker_prologue(parent_pid: int, stop: StopRequest | None = None) -> ParentWatch:
    """First thing every worker runs: die with the parent, and stop only when the parent says so.

    A Ctrl-C, or a scheduler's signal to every process of a job (Slurm's ``scancel --signal``, its
    SIGTERM at a time limit), reaches the workers as well as the training process; a worker that died
    of it would end the epoch before the training process could save a checkpoint. So workers ignore
    those signals, and with ``stop`` they obey SIGTERM only once the parent has set it.
    """
    enable_death_signal()
    watch = ParentWatch(parent_pid)
    if not watch.alive():  # the parent died before the death signal was armed
        os._exit(1)
    for sig in _JOB_WIDE_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    if stop is None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent may have a handler of its own
    else:
        signal.signal(signal.SIGTERM, functools.partial(_sigterm_if_asked, stop))
    return watch


def _sigterm_if_asked(stop: StopRequest, signum: int, frame: object) -> None:
    if stop.is_set():  # die of it, as a worker always did when its parent stopped it
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


@contextlib.contextmanager
def mask_sigint() -> Iterator[None]:
    """Ignore SIGINT while starting workers so that a Ctrl-C reaches only the parent."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def check_start_method(method: str | None, source: str = "start_method") -> None:
    """Raise ``ValueError`` unless ``method`` is None or one of :data:`START_METHODS`."""
    if method is not None and method not in START_METHODS:
        extra = (
            " (forkserver workers are children of the fork server, so they cannot die with the consumer)"
            if method == "forkserver"
            else ""
        )
        raise ValueError(
            f"{source}={method!r} is not supported; use one of {', '.join(map(repr, START_METHODS))}{extra}"
        )


def get_mp_context(start_method: str | None = None) -> mp.context.BaseContext:
    """The multiprocessing context for workers: ``start_method``, else the environment's, else fork."""
    if start_method is not None:
        method, source = start_method, "start_method"
    else:
        method, source = os.environ.get(START_METHOD_VAR) or None, START_METHOD_VAR
    check_start_method(method, source)
    return mp.get_context(method or DEFAULT_START_METHOD)


@contextlib.contextmanager
def frozen_gc() -> Iterator[None]:
    """Keep the garbage collector away from every existing object while children are forked.

    The children inherit the frozen state, so their collections never touch (and copy) the
    parent's pages; the parent unfreezes afterwards unless its objects were frozen already.
    """
    already = gc.get_freeze_count() > 0
    gc.freeze()
    try:
        yield
    finally:
        if not already:
            gc.unfreeze()


def stop_processes(procs: list, timeout: float = 3.0, stop: StopRequest | None = None) -> None:
    """Terminate, then kill, then reap ``multiprocessing`` processes so that no zombie remains.

    ``stop``: the workers' :class:`StopRequest`, set first so that they obey the SIGTERM.
    """
    if stop is not None:
        stop.set()
    for p in procs:
        if p.pid is not None and p.exitcode is None:
            with contextlib.suppress(OSError):
                p.terminate()
    for p in procs:
        if p.pid is None:
            continue
        p.join(timeout)
        if p.exitcode is None:
            with contextlib.suppress(OSError):
                p.kill()
            p.join(timeout)
        if p.exitcode is None:
            logger.error("dataflow worker %d did not exit after SIGKILL", p.pid)
            continue
        p.close()


def describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "is still running"
    if exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"
