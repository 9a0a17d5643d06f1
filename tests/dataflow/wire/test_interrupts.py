"""A Ctrl-C that arrives while pyzmq frees a received frame still interrupts the program.

Run in a child process: pytest replaces ``sys.unraisablehook`` during tests.
"""

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import collections, ctypes, itertools, signal, time
    import zmq
    import towerpack.dataflow  # installs the rescue hook

    # A shell's background job starts with SIGINT ignored, and Python then leaves it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    ctx = zmq.Context()
    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    a.bind("inproc://interrupts")
    b.connect("inproc://interrupts")
    a.send(b"x" * 4096)
    holder = [b.recv(copy=False)]

    class Boom:
        def __del__(self):
            raise ValueError("other unraisable exception")

    Boom()  # must still be reported by the default hook
    # Raise SIGINT, then free the frame, with no Python bytecode in between: the first place the
    # pending signal is noticed is pyzmq's Frame.__dealloc__, which cannot propagate it.
    raise_ = getattr(ctypes.CDLL(None), "raise")
    try:
        collections.deque(itertools.chain(map(raise_, [signal.SIGINT]), map(list.clear, [holder])), maxlen=0)
        time.sleep(3)
        print("the interrupt was lost", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    """
)


@pytest.mark.timeout(60)
def test_interrupt_lost_in_frame_dealloc_is_raised_again():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=50)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "interrupted", proc.stdout + proc.stderr
    assert "other unraisable exception" in proc.stderr
    # Handed back, not reported as ignored (pyzmq's Cython code still prints its own traceback).
    assert proc.stderr.count("Exception ignored") == 1, proc.stderr
