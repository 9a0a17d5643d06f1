"""The regroup of a Horovod job resized in place: every rank of the new membership re-initialises Horovod
through the launcher's store, the ranks agree on a source, and the source's model, optimizer state and data
position reach every rank in memory.

Which rank is the source: a peer lost in the middle of a step may leave some survivors with that step
applied and others without it (a ring all-reduce ends at different times on different ranks), so the ranks
first all-gather the global step each completed, and the one furthest on (the lowest rank among equals) is the
source; a joining rank never is. Its variables reach the others through one all-reduce per dtype of all
variables that only the source feeds (the others add zeros: exact), because the source is known only at
run time, while a broadcast's root is fixed in the graph. Its position keeper's state (what the job has
trained) follows the same way in an all-gather of bytes. All of these ops are built with the graph, before it
is finalized; they cost nothing until a regroup runs them.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass

import numpy as np

from towerpack.utils import resize_files as rf
from towerpack.utils.placement import placement

from .. import logger
from ..compat import tf, tfv1
from .init_barrier import store_barrier
from .rank_channel import RankChannel

__all__ = ["HorovodRegroup", "RegroupResult"]

#: The dtypes an all-reduce carries; variables of others (bool, string) keep each rank's own value.
_REDUCIBLE = (tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int32, tf.int64)


@dataclass(frozen=True)
class RegroupResult:
    """What the loop goes on with: the membership's rank and size, the source's global step and epoch, and the
    seconds each phase took (Horovod's re-initialisation, the vote, the variables, the data)."""

    rank: int
    size: int
    global_step: int
    epoch: int
    phases: dict[str, float]


class HorovodRegroup:
    """The ops and the steps of a regroup (see the module); built by HorovodTrainer when the launcher offers
    resizes in place."""

    def __init__(self, hvd, channel: RankChannel):
        self.hvd, self.channel = hvd, channel
        self._built = False

    def build(self, variables) -> None:
        """Build the regroup's ops over ``variables`` (all global variables: model, optimizer, step)."""
        hvd = self.hvd
        with tf.name_scope("Regroup"), tf.device("/cpu:0"):
            self._vote_in = tfv1.placeholder(tf.int64, [3], name="vote")
            self._votes = hvd.allgather(tf.reshape(self._vote_in, [1, 3]), name="RegroupVote")
            self._is_source = tfv1.placeholder(tf.bool, [], name="is_source")
            by_dtype: dict = {}
            self.skipped = []
            for v in variables:
                dtype = v.dtype.base_dtype
                if dtype in _REDUCIBLE:
                    by_dtype.setdefault(dtype, []).append(v)
                else:
                    self.skipped.append(v.op.name)
            assigns = []
            for i, group in enumerate(by_dtype.values()):  # one all-reduce per dtype, not per variable
                flat = tf.concat([tf.reshape(_value(v), [-1]) for v in group], 0)
                mine = tf.where(self._is_source, flat, tf.zeros_like(flat))
                total = hvd.allreduce(mine, op=hvd.Sum, name=f"RegroupVars_{i}")
                sizes = [v.shape.num_elements() for v in group]
                for v, part in zip(group, tf.split(total, sizes), strict=True):
                    assigns.append(tfv1.assign(v, tf.reshape(part, v.shape)).op)
            self._sync = tf.group(*assigns, name="sync")
            self._state_in = tfv1.placeholder(tf.uint8, [None], name="state")
            self._state = hvd.allgather(self._state_in, name="RegroupState")
        if self.skipped:
            logger.warning("A regroup keeps each rank's own value of %s (not all-reducible)", self.skipped)
        self._built = True

    def prime(self, sess, rank: int) -> None:
        """Run the regroup's ops once with every rank of the job, when the session starts (the variables
        from rank 0, as the first broadcast has them): a regroup then finds TensorFlow's executors for
        them ready."""
        sess.run(self._votes, {self._vote_in: [0, rank, 0]})
        sess.run(self._sync, {self._is_source: rank == 0})
        sess.run(self._state, {self._state_in: np.zeros(0, np.uint8)})

    def warm_up(self, sess, step) -> float:
        """A joining rank, before Horovod starts: run ``step()`` (the training step) and the regroup's ops
        once. Each fails at its first collective, but TensorFlow has built (and keeps) what it runs them
        with, and the kernels before the collectives have run once, so the first regroup and the first
        step do not hold the others up. Returns the seconds it took."""
        began = time.perf_counter()
        runs = (
            step,
            lambda: sess.run(self._votes, {self._vote_in: [-1, 0, 0]}),
            lambda: sess.run(self._sync, {self._is_source: False}),
            lambda: sess.run(self._state, {self._state_in: np.zeros(0, np.uint8)}),
        )
        for run in runs:
            with contextlib.suppress(tf.errors.OpError):  # expected: Horovod is not initialized yet
                run()
        return time.perf_counter() - began

    def run(
        self, sess, plan: rf.Plan, joining: bool, step: int, epoch: int, state, load_state
    ) -> RegroupResult:
        """Take ``plan``: re-initialise Horovod with this slot's new environment, pick the source (``step``:
        the global step this rank completed, -1 when it joins), bring its variables and its ``state()``
        bytes to every rank (``load_state(bytes)``). The input is restarted by the caller."""
        hvd = self.hvd
        phases = {}
        start = time.perf_counter()
        env = self.channel.env_of(plan)
        if hvd.is_initialized():
            hvd.shutdown()
        os.environ.update(env)
        where = placement()
        store_barrier(f"regroup-{plan.generation}", where.rank, where.world_size, self.channel.wait_s)
        hvd.init()
        rank, size = hvd.rank(), hvd.size()
        phases["reinit"] = time.perf_counter() - start
        t = time.perf_counter()
        votes = sess.run(self._votes, {self._vote_in: [step, rank, max(epoch, 0)]})
        best = max(int(s) for s, _, _ in votes)
        if best < 0:
            raise RuntimeError("a regroup found no rank that has trained: every rank is joining")
        source = min(int(r) for s, r, _ in votes if int(s) == best)
        epoch = int(next(e for _, r, e in votes if int(r) == source))
        phases["vote"] = time.perf_counter() - t
        t = time.perf_counter()
        sess.run(self._sync, {self._is_source: rank == source})
        phases["variables"] = time.perf_counter() - t
        t = time.perf_counter()
        mine = state() if rank == source else b""
        gathered = sess.run(self._state, {self._state_in: np.frombuffer(mine, np.uint8)})
        load_state(gathered.tobytes())
        phases["state"] = time.perf_counter() - t
        logger.info(
            "Regrouped as rank %d of %d (generation %d) from rank %d at global step %d: %s",
            rank,
            size,
            plan.generation,
            source,
            best,
            ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in phases.items()),
        )
        return RegroupResult(rank, size, best, epoch, phases)


def _value(v):
    return v.read_value() if hasattr(v, "read_value") else tf.identity(v)


def encode_state(parts: dict) -> bytes:
    """The regroup's state as bytes: a JSON header of each part's length, then the parts."""
    blobs = {k: bytes(v) for k, v in parts.items()}
    head = json.dumps({k: len(v) for k, v in blobs.items()}).encode()
    return len(head).to_bytes(4, "big") + head + b"".join(blobs.values())


def decode_state(data: bytes) -> dict[str, bytes]:
    """The parts of :func:`encode_state`'s bytes; a clear error on anything else (they came over the
    network)."""
    try:
        n = int.from_bytes(data[:4], "big")
        lengths = json.loads(data[4 : 4 + n])
        if not isinstance(lengths, dict) or not all(isinstance(v, int) and v >= 0 for v in lengths.values()):
            raise ValueError("bad header")
        parts, at = {}, 4 + n
        for k, length in lengths.items():
            parts[str(k)] = data[at : at + length]
            at += length
        if at != len(data):
            raise ValueError(f"{len(data) - at} bytes too many or few")
        return parts
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"the regroup's state from the source rank is not valid ({e})") from None
