"""HorovodTrainer: one tower per process, gradients all-reduced across processes by Horovod."""

from __future__ import annotations

import copy
import os

from towerpack.dataflow.placement import PlacementError

from . import logger
from .base import NewSessionCreator
from .callbacks.base import Callback
from .compat import tf, tfv1
from .devices import local_gpu_index, with_visible_gpu
from .horovod_rendezvous import RendezvousError, gloo_rendezvous
from .tower import TrainTowerContext
from .tower_trainer import SingleCostTrainer

__all__ = ["BroadcastGlobalVariables", "HorovodTrainer", "import_horovod"]

# A rank blocked in a collective whose peer is gone must not wait forever: Horovod warns after
# the check time and shuts the job down after the shutdown time (the user's values win).
_HOROVOD_DEFAULTS = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "30", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "120"}


def import_horovod():
    """``horovod.tensorflow``, initialized; a clear error when it is missing or cannot start.

    Ranks that srun, mpirun or torchrun started get their Gloo rendezvous from
    :mod:`~towerpack.trainer.horovod_rendezvous` first.
    """
    try:
        import horovod.tensorflow as hvd
    # A Horovod built against another TensorFlow fails to load its ops with other errors.
    except Exception as e:
        raise ImportError(
            "HorovodTrainer needs Horovod built with TensorFlow support, which is not importable "
            f"here ({type(e).__name__}: {e}). Run `make setup` to build it against this TensorFlow "
            "(a build with HOROVOD=0 leaves it out)."
        ) from e
    for key, value in _HOROVOD_DEFAULTS.items():
        os.environ.setdefault(key, value)
    if hvd.is_initialized():
        return hvd
    try:
        with gloo_rendezvous():
            hvd.init()
    except (RendezvousError, PlacementError):
        raise
    except Exception as e:
        raise RuntimeError(
            f"hvd.init() failed: {e}. Start the job with `launch --np N script.py` (or horovodrun) so "
            "that every rank gets the HOROVOD_* rendezvous variables, or run the script alone for one rank."
        ) from e
    return hvd


class BroadcastGlobalVariables(Callback):
    """Copy every global variable from rank 0 to the other ranks after each epoch.

    Synchronous all-reduce keeps replicas identical in exact arithmetic; this removes any drift
    (e.g. from non-deterministic kernels or variables updated outside the train op).
    """

    _chief_only = False

    def _trigger_epoch(self):
        # The op exists once the session does (it is built after every callback's graph).
        self.trainer.sess.run(self.trainer._broadcast_op)


class HorovodTrainer(SingleCostTrainer):
    """Data-parallel training with one process (and tower) per device, through Horovod.

    Start one process per GPU (or several on the CPU) with ``launch --np N script.py``; each
    rank reads its own data (shard the DataFlow by rank) at the per-rank batch size. Gradients
    are averaged (``average=True``) or summed across ranks before the optimizer applies them,
    so N ranks at batch b train like one process at batch N*b. Every global variable, including
    those of callbacks and input sources, is broadcast from rank 0 when the session starts, so
    ``session_init`` (and resuming from a checkpoint) needs to run on rank 0 only.

    Args:
        average: average the gradients across ranks (sum them otherwise).
        compression: a ``horovod.tensorflow.Compression`` (e.g. ``Compression.fp16``).
        broadcast_every_epoch: also broadcast all variables from rank 0 after each epoch.

    Attributes: ``hvd`` (the module), ``rank``, ``local_rank``, ``size``; ``is_chief`` is rank 0.
    """

    def __init__(self, average: bool = True, compression=None, broadcast_every_epoch: bool = False):
        self.hvd = hvd = import_horovod()
        self.rank, self.local_rank, self.size = hvd.rank(), hvd.local_rank(), hvd.size()
        self.is_chief = self.rank == 0
        self.average = bool(average)
        self.compression = compression if compression is not None else hvd.Compression.none
        self.broadcast_every_epoch = broadcast_every_epoch
        self._broadcast_op = None
        super().__init__()
        logger.info("Horovod rank %d of %d (local rank %d)", self.rank, self.size, self.local_rank)

    def allreduce(self, grads: list) -> list:
        """All-reduce a ``(grad, var)`` list across ranks (average or sum)."""
        if self.size == 1:
            return grads
        op = self.hvd.Average if self.average else self.hvd.Sum
        reduced = []
        with tf.name_scope("HorovodAllReduce"):
            for grad, var in grads:
                if isinstance(grad, tf.IndexedSlices):
                    grad = tf.convert_to_tensor(grad)
                reduced.append((self.hvd.allreduce(grad, op=op, compression=self.compression), var))
        return reduced

    def allreduce_sum(self, tensor, name: str | None = None):
        """The sum of ``tensor`` over the ranks (a Horovod allreduce)."""
        return self.hvd.allreduce(tensor, op=self.hvd.Sum, name=name)

    def _setup_graph(self, input, get_cost_fn, get_opt_fn):
        logger.info("Building the graph of one training tower (Horovod, %d ranks) ...", self.size)
        with TrainTowerContext(""):
            grads = self._make_get_grad_fn(input, get_cost_fn, get_opt_fn)()
            grads = self.allreduce(grads)
            self.train_op = get_opt_fn().apply_gradients(grads, name="train_op")
        return [BroadcastGlobalVariables()] if self.broadcast_every_epoch else []

    def run_step(self) -> None:
        try:
            super().run_step()
        except tf.errors.OpError as e:
            # Horovod cannot tell a peer that ended normally from one that failed or stalled, so
            # this stays an error (unlike the TF-server trainers, where a finished worker ends
            # the others cleanly).
            if "Horovod has been shut down" in e.message:
                logger.error(
                    "Rank %d: another rank has left Horovod. Either it ended training early "
                    "(StopTraining in some ranks only, or fewer steps: every rank must run the same "
                    "steps) or it failed (see its log).",
                    self.rank,
                )
            raise

    def initialize(self, session_creator, session_init) -> None:
        # Pin this rank's GPU; without GPUs (or with a custom creator) there is nothing to pin.
        # A launcher that sets CUDA_VISIBLE_DEVICES per rank leaves one GPU visible: that is ours.
        index = local_gpu_index(len(tf.config.list_physical_devices("GPU")), self.local_rank)
        if isinstance(session_creator, NewSessionCreator) and index is not None:
            session_creator = copy.copy(session_creator)
            session_creator.config = with_visible_gpu(session_creator.config, index)
        super().initialize(session_creator, session_init)

    def _before_session_creation(self) -> None:
        super()._before_session_creation()
        # Built last, so that it covers the variables made by callbacks and input sources too.
        with tf.name_scope("HorovodBroadcast"):
            self._broadcast_op = self.hvd.broadcast_variables(tfv1.global_variables(), root_rank=0)

    def _after_session_creation(self) -> None:
        super()._after_session_creation()
        logger.info("Broadcasting the global variables from rank 0 ...")
        self.sess.run(self._broadcast_op)
