"""CollectiveAllReduceTrainer: one tower per process, gradients all-reduced by TensorFlow's collective ops.

The synchronous data-parallel training of HorovodTrainer without Horovod: the processes are the
workers of a TF_CONFIG cluster (``launch --backend tf-collective``), each serving a
``tf.train.Server``, and every all-reduce is a ``CollectiveReduceV2`` op in the graph (a ring over
gRPC between hosts' CPUs, NCCL between GPUs), the ops ``MultiWorkerMirroredStrategy`` runs on.

Collective ops meet by (group key, instance key): every process builds the same graph in the same
order, so a counter gives matching instance keys; a fingerprint of the graph (its variables and
its number of collectives) is compared across the processes before the first step, so ranks that
built different graphs fail with an error instead of waiting for each other forever.
"""

from __future__ import annotations

import copy
import os

from towerpack.utils.placement import placement

from . import logger
from .cluster import ClusterTask, create_server, read_tf_config
from .collective_group import CollectiveGroup, collective_group, set_collective_group
from .compat import tf, tfv1
from .devices import local_gpu_index, with_visible_gpu
from .graph_builder.packing import DEFAULT_PACK_BYTES, GradientPacker
from .sesscreate import NewSessionCreator
from .tower import TrainTowerContext
from .tower_trainer import SingleCostTrainer

__all__ = ["CollectiveAllReduceTrainer", "CollectiveGroup", "collective_group"]

# How long the first collective (the graph check) waits for every process to start.
READY_TIMEOUT_S = 300

# What the collective kernels accept (booleans and strings are left out).
_BROADCAST_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int32, tf.int64)


def collective_place(task: ClusterTask) -> tuple[int, int, str]:
    """``(rank, size, group leader)`` of a task: the chief (a TF_CONFIG ``chief`` job, as Kubernetes
    TFJobs have) is rank 0 and leads the collective groups, then come the workers in order."""
    chiefs = len(task.spec.get("chief", []))
    rank = task.index if task.job == "chief" else chiefs + task.index
    leader = "/job:chief/replica:0/task:0" if chiefs else "/job:worker/replica:0/task:0"
    return rank, chiefs + task.num_workers, leader


def collective_configs(task: ClusterTask, config, gpu_index: int | None, nccl: bool, timeout_s: float = 0.0):
    """The session and server configs of a process of a collective job, from the user's session
    ``config`` (left unchanged): the collectives' group leader, NCCL when the tensors are on GPUs,
    this task's devices only (processes talk through collectives, never through graph partitions)."""
    session = with_visible_gpu(config, gpu_index)
    session.device_filters[:] = [task.device]
    session.experimental.collective_group_leader = collective_place(task)[2]
    session.experimental.collective_nccl = nccl
    if timeout_s and not session.operation_timeout_in_ms:
        # Bounds every step (a rank waiting in a collective for ranks that left) without a timeout on
        # each collective, which would cost a sleeping thread per execution (see CollectiveGroup).
        session.operation_timeout_in_ms = int(timeout_s * 1000)
    server = tfv1.ConfigProto()
    server.gpu_options.CopyFrom(session.gpu_options)
    server.experimental.CopyFrom(session.experimental)
    return session, server


class CollectiveAllReduceTrainer(SingleCostTrainer):
    """Data-parallel training with one process (and tower) per device, through TensorFlow's collective
    all-reduce (no Horovod needed).

    Start with ``launch --backend tf-collective --np N script.py`` (or ``--gpus``); any launcher that
    sets TF_CONFIG with worker tasks only works too, and a script run without TF_CONFIG is a
    one-process job. Each rank reads its own data at the per-rank batch size; gradients are averaged
    (``average=True``) or summed across ranks, so N ranks at batch b train like one process at batch
    N*b. Every global variable is broadcast from rank 0 when the session starts, so ``session_init``
    (and resuming from a checkpoint) needs to run on rank 0 only.

    Args:
        average: average the gradients across ranks (sum them otherwise).
        server: this task's ``tf.train.Server`` (default: started from TF_CONFIG, with the configs
            the collectives need).
        timeout_s: a collective that waits longer than this for the other processes fails the step
            (0: wait forever). Covers the slowest epoch-end work of any rank (e.g. inference on
            the chief), since the others wait in the next step's all-reduce meanwhile. It becomes the
            session's ``operation_timeout_in_ms`` (unless the session config sets one), which
            bounds every run of the session.
        pack_bytes: the gradients are all-reduced packed into flat buffers of about this size, one
            collective per buffer instead of one per variable (0: one per variable). The same value
            in every rank.

    Attributes: ``rank``, ``local_rank``, ``size``, ``task`` (a ClusterTask, None alone),
    ``group`` (the CollectiveGroup); ``is_chief`` is rank 0.
    """

    def __init__(
        self,
        average: bool = True,
        server=None,
        timeout_s: float = 600.0,
        *,
        pack_bytes: int = DEFAULT_PACK_BYTES,
    ):
        if not timeout_s >= 0:
            raise ValueError(f"timeout_s must be >= 0 (0: no timeout), got {timeout_s!r}")
        if not (isinstance(pack_bytes, int) and pack_bytes >= 0):
            raise ValueError(f"pack_bytes must be an int >= 0 (0: no packing), got {pack_bytes!r}")
        self.task = read_tf_config() if os.environ.get("TF_CONFIG") else None
        if self.task is not None and (self.task.num_ps or self.task.job not in ("chief", "worker")):
            raise ValueError(
                f"{type(self).__name__} runs in the chief and worker tasks of a cluster without "
                f"parameter servers; this is task {self.task.job}:{self.task.index} of a cluster with "
                f"{sorted(self.task.spec)}. "
                "Start it with `launch --backend tf-collective`, or use DistributedTrainerReplicated with "
                "--backend tf-server --ps K."
            )
        super().__init__()
        self.average = bool(average)
        self.server = server
        self.timeout_s = float(timeout_s)
        self.pack_bytes = pack_bytes
        self.rank, self.size, _ = collective_place(self.task) if self.task else (0, 1, "")
        self.local_rank = placement().local_rank
        self.is_chief = self.rank == 0
        n_gpus = len(tf.config.list_physical_devices("GPU"))
        # With GPU index g pinned, the process sees that GPU as its GPU:0.
        self.gpu_index = local_gpu_index(n_gpus, self.local_rank)
        prefix = self.task.device if self.task else ""
        self.device = f"{prefix}/device:{'GPU' if n_gpus else 'CPU'}:0"
        self.group = CollectiveGroup(
            self.size, self.rank, self.device, f"{prefix}/device:CPU:0", self.timeout_s
        )
        self._check = self._broadcast = None
        logger.info("Collective rank %d of %d (local rank %d)", self.rank, self.size, self.local_rank)

    def allreduce_sum(self, tensor, name: str | None = None):
        """The sum of ``tensor`` over the ranks (on the host; for small values such as votes)."""
        return self.group.all_reduce(tensor, on_host=True, name=name)

    def allgather(self, tensor, name: str | None = None):
        """Every rank's ``tensor``, concatenated along the first dimension in the collective group's
        order (on the host; for small values such as the position exchange's rows)."""
        return self.group.all_gather(tensor, name=name)

    def allreduce(self, grads: list) -> list:
        """All-reduce a ``(grad, var)`` list across ranks (average or sum), packed (``pack_bytes``)."""
        if self.size == 1:
            return grads
        with tf.name_scope("CollectiveAllReduce"):
            tensors = [tf.convert_to_tensor(g) for g, _ in grads]
            packer = GradientPacker.of(tensors, self.pack_bytes)
            reduced = [self.group.reduce(b, self.average) for b in packer.pack(tensors)]
            return list(zip(packer.unpack(reduced), [v for _, v in grads], strict=True))

    def _setup_graph(self, input, get_cost_fn, get_opt_fn):
        logger.info(
            "Building the graph of one training tower (collective all-reduce, %d ranks) ...", self.size
        )
        set_collective_group(self.group)
        with tfv1.device(self.device), TrainTowerContext(""):
            grads = self._make_get_grad_fn(input, get_cost_fn, get_opt_fn)()
            grads = self.allreduce(grads)
            self.train_op = get_opt_fn().apply_gradients(grads, name="train_op")
        return []

    # -- session ------------------------------------------------------------------------------------
    def initialize(self, session_creator, session_init) -> None:
        """A custom ``session_creator`` in a cluster must make its session on ``trainer.server.target``
        with the config ``collective_configs()`` gives."""
        ours = isinstance(session_creator, NewSessionCreator)
        if self.task is not None:
            user_config = session_creator.config if ours else None
            session, server = collective_configs(
                self.task, user_config, self.gpu_index, self.group.nccl, self.timeout_s
            )
            if self.server is None:
                self.server = create_server(self.task, server)
            if ours:
                session_creator = NewSessionCreator(self.server.target, session)
        elif ours and self.gpu_index is not None:
            session_creator = copy.copy(session_creator)
            session_creator.config = with_visible_gpu(session_creator.config, self.gpu_index)
        super().initialize(session_creator, session_init)

    def _before_session_creation(self) -> None:
        super()._before_session_creation()
        if self.size == 1:
            return
        # Built last, so that they cover the variables of callbacks and input sources too.
        variables = tfv1.global_variables()
        kept = [v for v in variables if v.dtype.base_dtype in _BROADCAST_DTYPES]
        if len(kept) < len(variables):
            skipped = sorted(v.op.name for v in variables if v.dtype.base_dtype not in _BROADCAST_DTYPES)
            logger.warning("Variables of types collectives cannot send keep their own values: %s", skipped)
        with tf.name_scope("CollectiveBroadcast"):
            self._broadcast = tf.group(*[v.assign(self.group.broadcast_from_rank0(v.value())) for v in kept])
            self._check = self.group.graph_check(variables)

    def _after_session_creation(self) -> None:
        super()._after_session_creation()
        if self.size == 1:
            return
        logger.info("Waiting for the other ranks ...")
        try:
            top, neg_bottom = self.sess.run(
                self._check, options=tfv1.RunOptions(timeout_in_ms=READY_TIMEOUT_S * 1000)
            )
        except tf.errors.DeadlineExceededError:
            raise RuntimeError(f"the other ranks did not start within {READY_TIMEOUT_S} s") from None
        if not top == -neg_bottom == self.group.fingerprint:
            raise RuntimeError(
                f"rank {self.rank}: the ranks built different graphs (their global variables or their "
                "number of collective ops differ); every rank must build the same model, input and "
                "callbacks (chief-only callbacks must not create variables or collectives)"
            )
        logger.info("Broadcasting the global variables from rank 0 ...")
        self.sess.run(self._broadcast)

    def run_step(self) -> None:
        try:
            super().run_step()
        except tf.errors.DeadlineExceededError:
            logger.error(
                "Rank %d waited more than timeout_s=%g s for the other ranks in a collective: one of "
                "them ended training early (StopTraining in some ranks only, or fewer steps: every "
                "rank must run the same steps), failed, or is slower than that (raise timeout_s)",
                self.rank,
                self.timeout_s,
            )
            raise
