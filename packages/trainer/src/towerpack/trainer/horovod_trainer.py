"""HorovodTrainer: one tower per process, gradients all-reduced across processes by Horovod."""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass

from towerpack.utils import resize_files as rf
from towerpack.utils.placement import PlacementError, placement

from . import logger
from .base import NewSessionCreator
from .callbacks.base import Callback
from .compat import tf, tfv1
from .devices import local_gpu_index, with_visible_gpu
from .horovod_rendezvous import RendezvousError, gloo_rendezvous
from .resize.in_place import InPlaceResize
from .resize.init_barrier import BarrierError, store_barrier
from .resize.rank_channel import RankChannel
from .resize.regroup import HorovodRegroup
from .tower import TrainTowerContext
from .tower_trainer import SingleCostTrainer

__all__ = ["BroadcastGlobalVariables", "HorovodTrainer", "HorovodTuning", "import_horovod"]

# A rank blocked in a collective whose peer is gone must not wait forever: Horovod warns after
# the check time and shuts the job down after the shutdown time (the user's values win).
_HOROVOD_DEFAULTS = {"HOROVOD_STALL_CHECK_TIME_SECONDS": "30", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "120"}

_FUSION_VAR, _CYCLE_VAR = "HOROVOD_FUSION_THRESHOLD", "HOROVOD_CYCLE_TIME"
_ELASTIC_VAR = "HOROVOD_ELASTIC"
#: Seconds the ranks of an elastic job wait for each other before hvd.init() (a rank that fails to start
#: ends the job sooner: its launcher sees it exit).
START_BARRIER_S = 600.0
_MIB = 1 << 20
# What Horovod (>= 0.21) uses when the variables are unset.
_DEFAULT_FUSION_BYTES, _DEFAULT_CYCLE_MS = 128 * _MIB, 1.0


@dataclass(frozen=True)
class HorovodTuning:
    """Horovod's tensor-fusion knobs, which ``hvd.init()`` reads once from the environment.

    ``fusion_threshold_mb``: gradients ready in the same cycle are packed into one all-reduce of
    up to this many MiB (0: one all-reduce per tensor); ``cycle_time_ms``: how often Horovod's
    background thread looks for ready tensors. None leaves the variable (or Horovod's default).
    """

    fusion_threshold_mb: float | None = None
    cycle_time_ms: float | None = None

    def __post_init__(self):
        if self.fusion_threshold_mb is not None and not self.fusion_threshold_mb >= 0:
            raise ValueError(
                f"fusion_threshold_mb must be >= 0 (0: no fusion), got {self.fusion_threshold_mb!r}"
            )
        if self.cycle_time_ms is not None and not self.cycle_time_ms > 0:
            raise ValueError(f"cycle_time_ms must be > 0, got {self.cycle_time_ms!r}")

    def env(self) -> dict[str, str]:
        """The variables to set before ``hvd.init()``."""
        env = {}
        if self.fusion_threshold_mb is not None:
            env[_FUSION_VAR] = str(round(self.fusion_threshold_mb * _MIB))
        if self.cycle_time_ms is not None:
            env[_CYCLE_VAR] = repr(float(self.cycle_time_ms))
        return env

    def check_in_effect(self) -> None:
        """Raise if Horovod, already initialized, runs with other values than these (it read the
        environment at ``hvd.init()``: what is set now, or its defaults)."""
        requested = self.env()
        knobs = [
            (_FUSION_VAR, "fusion_threshold_mb", self.fusion_threshold_mb, str(_DEFAULT_FUSION_BYTES)),
            (_CYCLE_VAR, "cycle_time_ms", self.cycle_time_ms, repr(_DEFAULT_CYCLE_MS)),
        ]
        for var, arg, value, default in knobs:
            in_effect = os.environ.get(var, default)
            if var in requested and float(requested[var]) != float(in_effect):
                raise RuntimeError(
                    f"HorovodTrainer({arg}={value!r}): Horovod is already initialized with "
                    f"{var}={in_effect}, and reads it only once, at hvd.init(). Pass the value to the "
                    f"first HorovodTrainer of the process, or set {var}={requested[var]} before hvd.init()."
                )


def import_horovod(tuning: HorovodTuning | None = None, init: bool = True):
    """``horovod.tensorflow``, initialized (unless ``init`` is false: a rank joining a running job
    initializes it when it regroups); a clear error when it is missing or cannot start.

    Ranks that srun, mpirun or torchrun started get their Gloo rendezvous from
    :mod:`~towerpack.trainer.horovod_rendezvous` first. ``tuning`` is applied before ``hvd.init()``;
    if Horovod is initialized already, it must be what is in effect.
    """
    try:
        import horovod.tensorflow as hvd
    # A Horovod built against another TensorFlow fails to load its ops with other errors.
    except Exception as e:
        raise ImportError(
            "HorovodTrainer needs Horovod built with TensorFlow support, which is not importable "
            f"here ({type(e).__name__}: {e}). Run `make setup` to build it against this TensorFlow "
            "(a build with HOROVOD=0 leaves it out), or train with CollectiveAllReduceTrainer "
            "(`launch --backend tf-collective`), which needs no Horovod."
        ) from e
    for key, value in _HOROVOD_DEFAULTS.items():
        os.environ.setdefault(key, value)
    tuning = tuning or HorovodTuning()
    if hvd.is_initialized():
        tuning.check_in_effect()
        return hvd
    os.environ.update(tuning.env())
    if not init:
        return hvd
    try:
        if rf.WAIT_VAR in os.environ:  # an elastic job's ranks meet first (see resize.init_barrier)
            where = placement()
            store_barrier("start", where.rank, where.world_size, START_BARRIER_S)
        with gloo_rendezvous():
            hvd.init()
    except (RendezvousError, PlacementError, BarrierError):
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
        compression: a ``horovod.tensorflow.Compression``: ``Compression.fp16`` halves the bytes
            sent (gradients are rounded to fp16 on the wire), for links slower than the compute.
        broadcast_every_epoch: also broadcast all variables from rank 0 after each epoch.
        fusion_threshold_mb, cycle_time_ms: Horovod's tensor fusion (see :class:`HorovodTuning`
            and docs/network.md); set before ``hvd.init()``, so only the first HorovodTrainer of
            a process can choose them (a later one with other values is an error).

    Attributes: ``hvd`` (the module), ``rank``, ``local_rank``, ``size``; ``is_chief`` is rank 0.
    """

    def __init__(
        self,
        average: bool = True,
        compression=None,
        broadcast_every_epoch: bool = False,
        fusion_threshold_mb: float | None = None,
        cycle_time_ms: float | None = None,
    ):
        channel = RankChannel.from_env()
        joining = channel is not None and channel.joining
        self.hvd = hvd = import_horovod(HorovodTuning(fusion_threshold_mb, cycle_time_ms), init=not joining)
        if joining:  # Horovod starts at the regroup; the plan it joins gave its place already
            # Until then Horovod's ops must not ask for its size while they are built (it is read at run
            # time in elastic mode); the variable is gone again before hvd.init() reads it.
            os.environ[_ELASTIC_VAR] = "1"
            where = placement()
            self.rank, self.local_rank, self.size = where.rank, where.local_rank, where.world_size
        else:
            self.rank, self.local_rank, self.size = hvd.rank(), hvd.local_rank(), hvd.size()
        self.is_chief = self.rank == 0
        self._channel = channel
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

    def allgather(self, tensor, name: str | None = None):
        """Every rank's ``tensor``, concatenated along the first dimension in rank order (a Horovod
        allgather)."""
        return self.hvd.allgather(tensor, name=name)

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
            if "Horovod has been shut down" in e.message and not (self.resize and self.resize.recoverable(e)):
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
        channel = self._channel
        if channel is not None:
            if self.size > 1:
                regroup = HorovodRegroup(self.hvd, channel)
                regroup.build(tfv1.global_variables())
                self.resize = InPlaceResize(self, channel, regroup)
            else:  # the graph has no collectives to regroup with
                channel.refuse("it started alone (world size 1): its graph has no collectives")
            if channel.joining:
                os.environ.pop(_ELASTIC_VAR, None)

    def _after_session_creation(self) -> None:
        super()._after_session_creation()
        if self.resize is not None and self.resize.channel.joining:
            return  # its variables come from the job at the regroup
        logger.info("Broadcasting the global variables from rank 0 ...")
        self.sess.run(self._broadcast_op)
        if self.resize is not None:
            self.resize.regroup.prime(self.sess, self.rank)
