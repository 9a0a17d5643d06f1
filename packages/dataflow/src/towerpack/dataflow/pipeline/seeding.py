"""Random streams for augmentation: different in every worker and rank, reproducible with a seed.

Augmentors (and anything else that draws randomness per datapoint) must not draw the same
numbers in every worker process, or N workers would produce N copies of one augmentation.
Each such object takes a *stream key* when it is made (a counter, so the same script gives the
same keys) and seeds its generator from :func:`stream_seed`:

- with a job seed (:func:`set_seed`, or ``TOWERPACK_SEED`` in the environment), the seed is a
  function of (job seed, rank, worker index, stream key): a run with the same seed and the same
  number of ranks and workers draws the same augmentations again;
- without one, it is fresh entropy, different in every process and every reset.

The epoch order of readers is another matter: it must be the *same* in every process of a job
(see :mod:`towerpack.dataflow.formats.reader`), and does not come from here.
"""

from __future__ import annotations

import itertools
import os

import numpy as np

from .sharding import current_rank, get_worker_info

__all__ = ["SEED_VAR", "fix_rng_seed", "get_seed", "new_stream_key", "set_seed", "stream_seed"]

#: Environment variable holding the job seed; :func:`set_seed` sets it so spawned workers see it.
SEED_VAR = "TOWERPACK_SEED"

_keys = itertools.count()


def set_seed(seed: int | None) -> None:
    """Make the augmentors' random streams in this process (and in workers started later)
    reproducible; readers' epoch orders have a ``seed`` of their own.

    ``None`` goes back to fresh entropy. Call it before the workers start.
    """
    if seed is None:
        os.environ.pop(SEED_VAR, None)
    else:
        os.environ[SEED_VAR] = str(int(seed))


#: The reference's name (``tensorpack.utils.utils.fix_rng_seed``). Unlike the reference, workers
#: and ranks still draw different streams, derived from the one seed.
fix_rng_seed = set_seed


def get_seed() -> int | None:
    """The job seed, or None when there is none."""
    value = os.environ.get(SEED_VAR)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {SEED_VAR}={value!r} is not an integer") from None


def new_stream_key() -> int:
    """A key for one random stream; keys follow creation order, so a script's keys repeat."""
    return next(_keys)


def stream_seed(key: int) -> int:
    """The seed of stream ``key`` in this process (see the module docstring)."""
    base = get_seed()
    if base is None:
        return int(np.random.SeedSequence().generate_state(1)[0])
    rank = current_rank()
    worker = get_worker_info()
    place = 0 if worker is None else worker.index + 1  # outside any runner, or worker i
    entropy = [base % 2**63, rank.rank, rank.world_size, place, key]
    return int(np.random.SeedSequence(entropy).generate_state(1)[0])
