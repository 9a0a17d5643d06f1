"""towerpack.utils.concurrency with real threads, processes and signals."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from towerpack.utils import concurrency
from towerpack.utils.concurrency import (
    DIE,
    LoopThread,
    OrderedContainer,
    OrderedResultGatherProc,
    ShareSessionThread,
    StoppableThread,
    start_proc_mask_signal,
    subproc_call,
)


def wait_until(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def gone(pid: int) -> bool:
    """The process has exited (a zombie nobody reaps counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_stoppable_thread_gives_up_waiting_on_a_queue_when_stopped():
    results = []

    class Worker(StoppableThread):
        def run(self):
            full = queue.Queue(maxsize=1)
            full.put(0)
            self.queue_put_stoppable(full, 1)  # waits: the queue is full
            results.append(self.queue_get_stoppable(queue.Queue()))  # waits: nothing comes

    w = Worker()
    w.start()
    time.sleep(0.3)
    assert w.is_alive() and not w.stopped()
    w.stop()
    w.join(5)
    assert not w.is_alive() and w.stopped() and results == [None]
    shared = threading.Event()
    a, b = StoppableThread(shared), StoppableThread(shared)
    a.stop()
    assert b.stopped()


def test_loop_thread_pauses_resumes_and_stops():
    count = []
    loop = LoopThread(lambda: (count.append(1), time.sleep(0.005)))
    assert loop.daemon
    loop.start()
    assert wait_until(lambda: len(count) > 5)
    loop.pause()
    time.sleep(0.05)  # a call under way finishes
    paused = len(count)
    time.sleep(0.2)
    assert len(count) == paused
    loop.resume()
    assert wait_until(lambda: len(count) > paused + 5)
    with pytest.raises(RuntimeError, match="not paused"):
        loop.resume()
    loop.stop()
    loop.join(5)
    assert not loop.is_alive()
    with pytest.raises(RuntimeError, match="pausable=False"):
        LoopThread(lambda: None, pausable=False).pause()


def test_share_session_thread_runs_under_the_starting_threads_session(caplog):
    import tensorflow.compat.v1 as tfv1

    graph = tfv1.Graph()
    with graph.as_default():
        c = tfv1.constant(21) * 2
    got = []

    class Reader(threading.Thread):
        def run(self):
            got.append(tfv1.get_default_session().run(c))

    class Subclass(ShareSessionThread):
        def run(self):
            with self.default_sess() as sess:
                got.append(sess.run(c))

    with tfv1.Session(graph=graph) as sess, sess.as_default():
        inner = Reader(name="reader", daemon=True)
        wrapped = ShareSessionThread(inner)
        assert wrapped.name == "reader" and wrapped.daemon
        for t in (wrapped, Subclass()):
            t.start()
            t.join(30)
    assert got == [42, 42]
    lonely = Subclass()  # started with no default session
    lonely.run = lambda: got.append(lonely.default_sess().__enter__())
    lonely.start()
    lonely.join(10)
    assert got[-1] is None and "was started with no default session" in caplog.text
    with pytest.raises(TypeError, match=r"wraps a threading\.Thread"):
        ShareSessionThread(object())


ENSURE_TERMINATE = """
import multiprocessing as mp, signal, time
from towerpack.utils import concurrency

def sleeper(ignore_term):
    if ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(60)

if __name__ == "__main__":
    concurrency.TERMINATE_GRACE = 1.0
    procs = [mp.get_context("fork").Process(target=sleeper, args=(flag,)) for flag in (False, True)]
    for p in procs:
        p.start()
    concurrency.ensure_proc_terminate(procs)
    print(*[p.pid for p in procs], flush=True)
    # the program ends here; without the hook it would wait for its children for a minute
"""


@pytest.mark.timeout(60)
def test_ensure_proc_terminate_stops_children_when_the_program_exits(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(ENSURE_TERMINATE)
    start = time.monotonic()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    pids = [int(p) for p in done.stdout.split()]
    assert len(pids) == 2 and all(gone(p) for p in pids)
    assert time.monotonic() - start < 20  # the SIGTERM-proof child was killed after the grace
    with pytest.raises(TypeError, match="multiprocessing processes"):
        concurrency.ensure_proc_terminate(subprocess.Popen(["true"]))


def _sleep(ready, seconds: float) -> None:
    ready.set()
    time.sleep(seconds)


@pytest.mark.timeout(60)
def test_start_proc_mask_signal_starts_children_that_ignore_ctrl_c():
    # Python's own Ctrl-C handler, whatever this test process inherited (a background job ignores it)
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    ctx = mp.get_context("fork")
    ready = [ctx.Event(), ctx.Event()]
    masked, plain = (ctx.Process(target=_sleep, args=(r, 30)) for r in ready)
    try:
        start_proc_mask_signal(masked)
        plain.start()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the parent's is back
        # a signal that arrives while a child is still being forked is dropped by CPython: wait
        assert all(r.wait(10) for r in ready)
        for p in (masked, plain):
            os.kill(p.pid, signal.SIGINT)
        plain.join(10)
        assert plain.exitcode is not None  # a Ctrl-C ends a child started normally ...
        time.sleep(0.3)
        assert masked.is_alive()  # ... not one started with the signal masked
    finally:
        signal.signal(signal.SIGINT, inherited)
        for p in (masked, plain):
            if p.is_alive():
                p.terminate()
            p.join(10)


DEATH_SIGNAL_PARENT = """
import subprocess, sys, time
child = subprocess.Popen(
    [sys.executable, "-c",
     "import time\\n"
     "from towerpack.utils.concurrency import enable_death_signal\\n"
     "print(enable_death_signal(), flush=True)\\n"
     "time.sleep(60)\\n"],
    stdout=subprocess.PIPE, text=True)
assert child.stdout.readline().strip() == "True"
print(child.pid, flush=True)
time.sleep(60)
"""


@pytest.mark.timeout(60)
def test_enable_death_signal_ends_a_child_whose_parent_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", DEATH_SIGNAL_PARENT], stdout=subprocess.PIPE, text=True)
    try:
        child_pid = int(parent.stdout.readline())
        assert not gone(child_pid)
        parent.kill()  # SIGKILL: the parent cleans up nothing
        parent.wait(10)
        assert wait_until(lambda: gone(child_pid), timeout=10)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(10)


def test_subproc_call_returns_output_and_code():
    assert subproc_call("echo hello") == (b"hello\n", 0)
    output, code = subproc_call("echo oops >&2; exit 3")
    assert (output, code) == (b"oops\n", 3)
    output, code = subproc_call("echo started; sleep 10; echo never", timeout=0.5)
    assert code == -1 and output == b"started\n"  # and the shell's sleep is gone (no process left)
    assert subproc_call("exec /nonexistent/program")[1] == 127


def test_ordered_container_and_gather_process():
    c = OrderedContainer(start=1)
    c.put(3, "c")
    c.put(1, "a")
    assert c.has_next() and c.get() == (1, "a") and not c.has_next()
    with pytest.raises(LookupError, match="item 2 has not arrived"):
        c.get()
    c.put(2, "b")
    assert [c.get(), c.get()] == [(2, "b"), (3, "c")]

    data = mp.Queue()
    gather = OrderedResultGatherProc(data, nr_producer=1)
    gather.start()
    try:
        for item in [(2, "c"), (0, "a"), (1, "b"), (DIE, None)]:
            data.put(item)
        results = [gather.get() for _ in range(4)]
    finally:
        gather.join(10)
    assert results == [(0, "a"), (1, "b"), (2, "c"), (DIE, None)] and gather.exitcode == 0
