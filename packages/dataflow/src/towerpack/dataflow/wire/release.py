"""Zero-copy sends: keep the thread in which pyzmq releases sent buffers from preempting the sender.

pyzmq sends a buffer without copying it by holding a reference until ZMQ is done with it; ZMQ's I/O
thread then wakes a Python thread of pyzmq's (``zmq.utils.garbage``), which drops the reference and
needs the GIL to do so. Woken while the sending thread runs Python, it preempts that thread, waits for
the GIL and so on, once for every buffer sent. A data server sending 200 KB datapoints on 2 cores
spent 6 to 9 us of CPU per datapoint in that thread, against 3 in a plain pyzmq sender that waits in
ZMQ most of the time (``benchmarks/dataflow_transport.py``). At a lower priority the release thread
runs when the sender waits (for credit, in a server) and releases several buffers at once.

:func:`demote_release_thread` sets it ``RELEASE_NICE`` below the calling thread (Linux, where a thread
has a nice value of its own). Under a CPU saturated by other work it still gets its share, and a
release takes about 2 us.
"""

from __future__ import annotations

import logging
import os
import sys

from zmq.utils import garbage

__all__ = ["RELEASE_NICE", "demote_release_thread"]

logger = logging.getLogger(__name__)

#: How much lower than its own the release thread's priority is set (nice values: 0 to 19).
RELEASE_NICE = 10


def demote_release_thread() -> bool:
    """Lower the priority of pyzmq's release thread in this process; whether there is nothing more to
    do (False while that thread has not started: pyzmq starts it with the first zero-copy send)."""
    if not sys.platform.startswith("linux"):
        return True
    gc = garbage.gc
    thread = getattr(gc, "thread", None)
    if thread is None or not gc.is_alive() or thread.native_id is None:
        return False
    tid = thread.native_id
    try:
        target = min(19, os.getpriority(os.PRIO_PROCESS, 0) + RELEASE_NICE)  # 0: the calling thread
        if os.getpriority(os.PRIO_PROCESS, tid) < target:
            os.setpriority(os.PRIO_PROCESS, tid, target)
    except OSError as e:  # it ended meanwhile, or the system forbids it: sends work as before
        logger.debug("could not lower the priority of pyzmq's release thread: %s", e)
    return True
