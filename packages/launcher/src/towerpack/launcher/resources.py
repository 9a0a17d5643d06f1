"""Each local process's share of the node's cores: thread-pool sizes, and optionally CPU pinning.

Without limits, every rank's TensorFlow sizes its thread pools to all cores of the host, so N ranks
on one node run N times too many threads. The launcher gives each process, unless the user set them:

- ``TF_NUM_INTRAOP_THREADS`` = its share of the cores (TensorFlow's pool for work inside one op),
- ``TF_NUM_INTEROP_THREADS`` = the same, at least 2 (the pool that runs independent ops; one thread
  would serialize a rank's input pipeline behind its training step),
- ``OMP_NUM_THREADS`` = its share (OpenMP and BLAS libraries such as numpy's).

TensorFlow reads the two ``TF_NUM_*`` variables when it creates its first session, for every
``ConfigProto`` whose thread counts are left at 0. ``--cpu-bind`` also pins each process to its
own cores (children inherit the pinning).
"""

from __future__ import annotations

import os

THREAD_VARS = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS")


def usable_cores() -> list[int]:
    """The cores this launcher may run on (its affinity: a scheduler's allocation, ``taskset``)."""
    return sorted(os.sched_getaffinity(0))


def core_sets(cores: list[int], count: int) -> list[list[int]]:
    """``count`` disjoint, contiguous, equal shares of ``cores`` (the remainder unused); with more
    processes than cores, process ``i`` gets core ``i % len(cores)`` alone."""
    if count <= len(cores):
        per = len(cores) // count
        return [cores[i * per : (i + 1) * per] for i in range(count)]
    return [[cores[i % len(cores)]] for i in range(count)]


def thread_env(share: int, env: dict) -> dict[str, str]:
    """The thread-count variables for a process with ``share`` cores, leaving out those in ``env``."""
    share = max(share, 1)
    values = {
        "TF_NUM_INTRAOP_THREADS": share,
        "TF_NUM_INTEROP_THREADS": max(share, 2),
        "OMP_NUM_THREADS": share,
    }
    return {k: str(v) for k, v in values.items() if k not in env}
