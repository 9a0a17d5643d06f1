"""Keep the memory of received frames in the process, so that receiving does not fault it in again.

ZMQ's I/O thread allocates every large received frame with ``malloc``, and the consumer frees it
when it is done with the datapoint. glibc gives the top of a heap back to the kernel as soon as more
than twice the largest frame seen so far is free there (its dynamic trim threshold), and a stream of
frames crosses that line all the time: the next frames are then written into fresh pages, each one a
page fault. A consumer of 200 KB datapoints took about 12 faults per datapoint, which made up half
the CPU time its process spent per datapoint (``benchmarks/dataflow_transport.py``).

:func:`keep_freed_memory` puts glibc's allocator in the state its own dynamic rule reaches once a
32 MiB block has been freed: blocks up to 32 MiB come from the heap, and a heap keeps up to 64 MiB
of free memory at its top. A process keeps that much more memory per heap, and no longer faults
for every frame. Nothing changes on other C libraries, nor when the environment already sets
glibc's malloc tunables (``MALLOC_TRIM_THRESHOLD_`` and the like, or ``GLIBC_TUNABLES``): the
user's choice stands.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["keep_freed_memory"]

#: ``mallopt`` parameters (glibc's ``malloc.h``).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: glibc's largest dynamic mmap threshold on 64-bit systems, and the trim threshold it pairs with.
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD
#: Environment variables through which a user already tunes glibc's malloc.
_USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")

_applied: bool | None = None


def _glibc() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError):
        return False


def _user_tuned() -> bool:
    return any(name in os.environ for name in _USER_SETTINGS) or "glibc.malloc." in os.environ.get(
        "GLIBC_TUNABLES", ""
    )


def keep_freed_memory() -> bool:
    """Set glibc's trim and mmap thresholds as the module docstring says, once per process; whether
    they are set (False on other C libraries and when the environment tunes malloc)."""
    global _applied
    if _applied is None:
        _applied = False
        if _glibc() and not _user_tuned():
            try:
                mallopt = ctypes.CDLL(None).mallopt
            except (OSError, AttributeError):
                return False
            mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
            # The mmap threshold first: setting either one ends glibc's dynamic adjustment.
            _applied = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
                mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
            )
    return _applied
