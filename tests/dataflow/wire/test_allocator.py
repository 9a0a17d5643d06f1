"""What a consumer does to glibc's allocator: memory freed by received frames stays in the process, so
the next frames do not fault their pages in again; a user's own malloc settings are left alone."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(
        not (sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION")), reason="glibc only"
    ),
]

# Frees 50 blocks of 200 KB (a consumer's window of case-b datapoints) and allocates them again, 20
# times, touching every page as ZMQ's receiving thread does; prints the page faults that took.
CYCLES = textwrap.dedent(
    """
    import ctypes, resource, sys
    from towerpack.dataflow import RemoteDataZMQ
    from towerpack.dataflow.wire.allocator import keep_freed_memory

    if sys.argv[1] == "consumer":
        c = RemoteDataZMQ("tcp://127.0.0.1:9", timeout=1)
        c.reset_state()
        c.close()
    elif sys.argv[1] == "call":
        print("applied", keep_freed_memory())
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]

    def cycle():
        blocks = [libc.malloc(200_000) for _ in range(50)]
        for b in blocks:
            libc.memset(b, 1, 200_000)
        for b in blocks:
            libc.free(b)

    cycle()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        cycle()
    print("faults", resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """
)


def run(mode: str, **env: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    out = subprocess.run(
        [sys.executable, "-c", CYCLES, mode],
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=50,
        check=True,
    ).stdout
    return dict(line.split(" ", 1) for line in out.splitlines())


def test_a_consumer_keeps_freed_frames_memory_so_the_next_frames_do_not_fault_it_in():
    blocks_pages = 20 * 50 * 200_000 // 4096
    untouched = int(run("none")["faults"])
    consumer = int(run("consumer")["faults"])
    assert untouched > blocks_pages // 2  # glibc gives the freed blocks back: every round faults again
    assert consumer < blocks_pages // 100


def test_the_environment_s_malloc_settings_stand():
    assert run("call")["applied"] == "True"
    assert run("call", MALLOC_TRIM_THRESHOLD_="1000000")["applied"] == "False"
    assert run("call", GLIBC_TUNABLES="glibc.malloc.mmap_threshold=1000000")["applied"] == "False"
