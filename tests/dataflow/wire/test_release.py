"""pyzmq's release thread (it drops the references of zero-copy sends) runs below the thread that sends,
once pyzmq has started it; lowering it again changes nothing."""

import subprocess
import sys
import textwrap

import pytest

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own nice value is Linux's"),
]

# In a fresh process: nothing to lower before the first zero-copy send starts the thread.
PROBE = textwrap.dedent(
    """
    import os
    import numpy as np, zmq
    from zmq.utils import garbage
    from towerpack.dataflow.wire.codec import send_frames
    from towerpack.dataflow.wire.release import RELEASE_NICE, demote_release_thread

    print("before", demote_release_thread())
    ctx = zmq.Context()
    push, pull = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    pull.bind("inproc://release")
    push.connect("inproc://release")
    send_frames(push, [np.zeros(1 << 20, np.uint8)])
    pull.recv(copy=False)
    print("after", demote_release_thread(), demote_release_thread())
    nice = lambda tid: os.getpriority(os.PRIO_PROCESS, tid)
    print("nice", nice(garbage.gc.thread.native_id), min(19, nice(0) + RELEASE_NICE))
    push.close(0); pull.close(0); ctx.term()
    """
)


def test_the_release_thread_runs_below_the_sender_once_started():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=50, check=True
    ).stdout
    lines = dict(line.split(" ", 1) for line in out.splitlines())
    assert lines["before"] == "False"
    assert lines["after"] == "True True"
    release, wanted = lines["nice"].split()
    assert release == wanted  # RELEASE_NICE below the sender (at most 19): lowered once, not twice
