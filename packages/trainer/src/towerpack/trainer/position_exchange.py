"""PositionExchange: keeps count of the items a job trained on, in the tracker's tag mode.

Every datapoint the trainer takes from its pipeline carries the keys of its items (epoch and
position, :mod:`towerpack.dataflow.resume.tags`), logged in the order the input source took them;
the datapoints of step ``s`` are the log's entries ``(s - 1) * towers .. s * towers - 1``.

- One rank: every ``SETTLE_EVERY`` steps the keys of the datapoints trained on go into the tracker's
  ledger (the log would otherwise hold an epoch of them until the next checkpoint).
- Several ranks (they all-reduce): with every step, each rank packs the keys of what that step
  trains on into one ``int64`` row of ``1 + capacity`` values (:func:`~towerpack.dataflow.
  position_tags.pack_keys`: a key per entry, a run of consecutive keys in two), and an all-gather
  of the rows (``trainer.allgather``; asked for once the step's gradients are ready for their
  all-reduce, as ``PreemptionSaver``'s vote is) gives every rank every row, which it adds to the
  keeper's ledger. So after every step the chief knows what the job trained on, and a checkpoint
  records the union of the ranks' items (the other ranks tell their data servers which epochs are
  done). Keys that do not fit in a row go with the next steps (only items passed over are that many).

Why an all-gather of a fixed row: what a rank sends must not grow with the number of ranks. An
all-reduce needs every rank to send a matrix with a row for each rank (all zero but its own), so
its input grows as ranks x row and its ring traffic is twice the matrix. A gathered row is the same
size at any number of ranks, and each rank only receives the others' rows once; those rows are the
least any scheme must deliver for every rank (the chief at least) to know the union. The row has a
fixed size (collectives need one shape in all ranks, and an exchange of sizes first would cost a
second collective per step) for the worst case, a step of keys that are not consecutive (shuffled
items): ``capacity = max(64, 2 x keys per step)``, the factor 2 for items dropped by the pipeline,
which travel with the next datapoint. Keys are sent whole (``epoch << 40 | position``: exact, no
limit on epochs or positions) and runs of consecutive ones in two entries, so the common step (a
batch read in order from a rank's part of the epoch) takes 2 entries and a backlog clears at once.

Bytes per step and rank at batch 64 per rank, one tower (capacity 128), ring collectives:

=====  ======================================  ======================================
ranks  before: all-reduce of [ranks, 257] f32   now: all-gather of [1, 129] int64
       (input; sent + received)                 (input; output; sent + received)
=====  ======================================  ======================================
8      8.2 KB; 28.8 KB                          1.0 KB; 8.3 KB; 14.4 KB
64     65.8 KB; 259 KB                          1.0 KB; 66.0 KB; 130 KB
512    526 KB; 2.10 MB                          1.0 KB; 528 KB; 1.05 MB
=====  ======================================  ======================================

Before training, an all-reduce of its own gives every rank the chief's session key, by which data
servers tell one job (one start of it) from another.
"""

from __future__ import annotations

import uuid

import numpy as np

from towerpack.dataflow.resume.keys import split_keys
from towerpack.dataflow.resume.tags import pack_keys, unpack_keys

from . import logger
from .callback import Callback
from .compat import tf, tfv1

__all__ = ["PositionExchange"]

#: One rank: settle the log into the ledger every this many steps.
SETTLE_EVERY = 64
#: The ops of the trainers' gradient all-reduce (Horovod's, TensorFlow's collective), to fuse with.
_ALLREDUCE_OPS = ("HorovodAllreduce", "CollectiveReduceV2")
#: Seconds a step waits for the tags of its datapoints before it looks whether the input failed.
_WAIT_S = 1.0
#: Keys one datapoint may carry when the items per datapoint are not known (data from servers).
DEFAULT_ITEMS = 1024


def _session_key() -> tuple[int, int]:
    """A fresh session key: two numbers of 24 bits (exact in a float32 all-reduce)."""
    value = uuid.uuid4().int
    return value & 0xFFFFFF, (value >> 24) & 0xFFFFFF


class PositionExchange(Callback):
    """See the module docstring; made by ``PositionKeeper.callback()``."""

    _chief_only = False

    def __init__(self, keeper):
        self.keeper = keeper
        self._ranks = keeper.world_size
        self._backlog = np.zeros(0, np.int64)
        self._warned = False
        self._gathered = None

    def _takes_part_in_runs(self) -> bool:
        return self._gathered is not None

    def _setup_graph(self):
        if self._ranks == 1:
            return
        keeper = self.keeper
        towers = keeper.datapoints_per_step
        self.capacity = max(64, 2 * towers * _items_per_datapoint(keeper))
        width = 1 + self.capacity
        # With a default: other callbacks' ops may run without this feed.
        self._row = tfv1.placeholder_with_default(tf.zeros([width], tf.int64), [width], name="positions")
        grads = [op.inputs[0] for op in self.graph.get_operations() if op.type in _ALLREDUCE_OPS]
        with tf.control_dependencies(grads):
            row = tf.reshape(self._row, [1, width])
        gathered = self.trainer.allgather(row, name="PositionExchange")
        if gathered is None:
            raise RuntimeError(
                f"exact_resume: {type(self.trainer).__name__} trains {self._ranks} ranks in step but has no "
                "all-gather to tell the chief what the others trained on"
            )
        self._gathered = tf.reshape(gathered, [-1, width])  # the ranks may change (resizes in place)
        # The session key goes alone, before training: an op that waited for gradients would take a
        # datapoint from the input that no step trains on.
        self._key = tfv1.placeholder_with_default(tf.zeros([2]), [2], name="session_key")
        self._keys = self.trainer.allreduce_sum(self._key, name="SessionKey")

    def _before_train(self):
        tracker = self.keeper.tracker
        resize = self.trainer.resize
        if self._gathered is None or (resize is not None and resize.channel.joining):
            # A rank joining a running job has no Horovod yet; its data comes from no server (a job that
            # reads from servers does not resize in place).
            tracker.set_session(_session_key())
            return
        mine = np.array(_session_key() if self.trainer.is_chief else (0, 0), np.float32)
        key = self.trainer.sess.run(self._keys, feed_dict={self._key: mine})
        tracker.set_session(tuple(int(v) for v in np.rint(key)))

    def _trigger_step(self):
        if self._gathered is None and self.trainer.global_step % SETTLE_EVERY == 0:
            self.keeper.tracker.settle(self.trainer.datapoints_trained())

    def _before_run(self, ctx):
        keys = np.concatenate([self._backlog, self._step_keys()])
        keys = keys[split_keys(keys)[0] >= self.keeper.ledger.first]  # earlier epochs are done
        row, self._backlog = pack_keys(keys, self.capacity)
        if len(self._backlog) and not self._warned:
            self._warned = True
            logger.warning(
                "exact_resume: a step carried %d item positions, more than the %d entries of the exchange "
                "hold; the rest go with the next steps",
                len(keys),
                self.capacity,
            )
        return tfv1.train.SessionRunArgs(fetches=self._gathered, feed_dict={self._row: row})

    def _after_run(self, run_context, run_values):
        if run_values.results is None:
            return
        keeper = self.keeper  # every rank keeps the count: the chief records it, all tell their servers
        if keeper.ledger.size is None:
            keeper.ledger.set_size(keeper.tracker.size)
        keeper.ledger.add(unpack_keys(run_values.results))
        keeper.tracker.note_done(keeper.ledger.first)

    def _step_keys(self) -> np.ndarray:
        """The keys of the datapoints this step trains on, once the input source has taken them."""
        log, towers = self.keeper.tracker.log, self.keeper.datapoints_per_step
        while True:
            try:
                return log.pop(towers, timeout=_WAIT_S)
            except TimeoutError:
                self.keeper.source.raise_if_failed()


def _items_per_datapoint(keeper) -> int:
    """The items one datapoint of the trainer's input holds: from the pipeline, else from the input
    signature's batch dimension, else ``DEFAULT_ITEMS``."""
    tracker = keeper.tracker
    if not tracker.from_servers:
        return tracker.units.rank
    signature = getattr(keeper.source, "_input_signature", None) or []
    dims = [spec.shape[0] for spec in signature if spec.shape.rank]
    known = [int(d) for d in dims if d is not None]
    return max(known) if known else DEFAULT_ITEMS
