"""Synchronous training on a ``tf.train.Server`` cluster described by TF_CONFIG.

Start with ``launch --backend tf-server --np N --ps K script.py``: N workers and K parameter
servers all run the script. Constructing a trainer in a parameter-server task serves the
cluster's variables until every worker has finished, then exits the process (status 0). Workers
send heartbeats to the parameter servers; a parameter server that hears nothing from an
unfinished worker for ``worker_timeout`` seconds exits with status 1, which in turn ends the
workers blocked on it, so that no task of a broken job waits forever.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time

from towerpack.utils.placement import placement

from . import logger
from .cluster import ClusterTask, create_server, read_tf_config
from .compat import tf, tfv1
from .devices import local_gpu_index, with_visible_gpu
from .graph_builder.distributed import (
    chief_copies,
    close_sync_queues,
    global_copies,
    is_sync_queue_closed,
    pull_variables,
    ready_queue,
    status_queue,
    sync_apply_gradients,
)
from .graph_builder.packing import DEFAULT_PACK_BYTES, GradientPacker
from .sesscreate import NewSessionCreator
from .signal_handlers import StopSignalHandlers
from .stop_training import StopTraining
from .tower import TrainTowerContext
from .tower_trainer import SingleCostTrainer

__all__ = [
    "DistributedReplicatedTrainer",
    "DistributedTrainerParameterServer",
    "DistributedTrainerReplicated",
    "WorkerLostError",
    "run_parameter_server",
    "worker_configs",
]

# How long a worker waits for the chief to initialize the cluster's variables.
READY_TIMEOUT_S = 300
# How long a parameter server waits for a sign of life from a worker before giving up the job.
WORKER_TIMEOUT_S = 120.0
# How often a worker sends a heartbeat (more often for a short worker_timeout).
HEARTBEAT_S = 2.0


class WorkerLostError(RuntimeError):
    """A worker stopped sending heartbeats before it finished."""


def run_parameter_server(
    server=None, task: ClusterTask | None = None, worker_timeout: float = WORKER_TIMEOUT_S
) -> None:
    """Serve as parameter server until every worker has finished, then return.

    Raises:
        WorkerLostError: a worker sent no heartbeat for ``worker_timeout`` seconds before it
            finished (none at all within ``max(worker_timeout, READY_TIMEOUT_S)`` of the start).
    """
    task = task or read_tf_config()
    if task.job != "ps":
        raise RuntimeError(f"run_parameter_server() runs in a ps task, this is {task.job}:{task.index}")
    # A parameter server computes nothing: it keeps off the GPUs, which belong to the workers.
    server = server or create_server(task, tfv1.ConfigProto(device_count={"GPU": 0}))
    with tf.Graph().as_default():
        take = status_queue(task.index, task.num_workers).dequeue()
        # Only its own device: a ps that dialed a worker still starting would back off and fail later.
        sess = tfv1.Session(server.target, config=tfv1.ConfigProto(device_filters=[task.device]))
        logger.info("Parameter server %d serves %d workers", task.index, task.num_workers)
        try:
            with _serving_through_stop_signals(task.index):
                _watch_workers(sess, take, task, worker_timeout)
        finally:
            sess.close()
    logger.info("Parameter server %d: every worker has finished", task.index)


def _serving_through_stop_signals(index: int) -> StopSignalHandlers:
    """A stop signal (a scheduler's SIGTERM or SIGUSR1, sent to every task at once) does not end a
    parameter server: the workers still need it to finish their step and save a checkpoint. It
    keeps serving until they have finished (or gone silent), as under ``launch``, which signals
    the parameter servers only after the workers."""

    def note(signum, _frame):
        logger.info(
            "Parameter server %d received %s: it serves until every worker has finished%s",
            index,
            signal.Signals(signum).name,
            " (a second Ctrl-C interrupts it)" if signum == signal.SIGINT else "",
        )

    return StopSignalHandlers(note)


def _watch_workers(sess, take, task: ClusterTask, worker_timeout: float) -> None:
    """Read the status queue until every worker has finished; raise if one goes silent."""
    options = tfv1.RunOptions(timeout_in_ms=1000)
    # Until its first heartbeat, a worker may still be starting: it gets as long as the chief does.
    first_wait = max(worker_timeout, READY_TIMEOUT_S)
    deadlines = dict.fromkeys(range(task.num_workers), time.monotonic() + first_wait)
    while deadlines:
        try:
            worker, finished = sess.run(take, options=options)
            deadlines[int(worker)] = time.monotonic() + worker_timeout
            if finished:
                del deadlines[int(worker)]
        except tf.errors.DeadlineExceededError:
            pass
        now = time.monotonic()
        silent = sorted(w for w, deadline in deadlines.items() if now > deadline)
        if silent:
            raise WorkerLostError(
                f"parameter server {task.index}: worker(s) {silent} did not finish and sent no "
                f"heartbeat for {worker_timeout:.0f} s ({first_wait:.0f} s for the first one): the "
                "process died or stopped. Ending the job; raise worker_timeout= if workers can be "
                "silent for longer."
            )


def worker_configs(task: ClusterTask, config, gpu_index: int | None):
    """The session and the server config of a worker, from the user's session ``config`` (left
    unchanged): the session sees the parameter servers and this task only, and both show only
    GPU ``gpu_index`` when it is given (the server's config is what creates the devices)."""
    session = with_visible_gpu(config, gpu_index)
    session.device_filters[:] = ["/job:ps", task.device]
    server = tfv1.ConfigProto()
    server.gpu_options.CopyFrom(session.gpu_options)
    return session, server


class _Heartbeat:
    """Tells every parameter server, from a thread, that this worker is alive; ``finish()``
    tells them it has finished, and ends the synchronous steps of the others (whose gradients
    have the dtypes and shapes of ``grads``). Runs in a session and graph of its own."""

    def __init__(self, target: str, task: ClusterTask, interval: float, grads: tuple[list, list]):
        self.interval = interval
        graph = tf.Graph()
        with graph.as_default():
            queues = [status_queue(i, task.num_workers) for i in range(task.num_ps)]
            self._beat = tf.group(*[q.enqueue([task.index, False]) for q in queues])
            finished = tf.group(*[q.enqueue([task.index, True]) for q in queues])
            self._finish = [close_sync_queues(*grads, task.num_workers), finished]
        config = tfv1.ConfigProto(device_filters=["/job:ps", task.device])
        self._sess = tfv1.Session(target, graph=graph, config=config)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="towerpack-heartbeat", daemon=True)

    def start(self, timeout_s: float) -> None:
        """Deliver the first heartbeat, then keep beating from a thread. Called once the cluster
        answers and before the first step: a worker that has trained is known to every parameter
        server, which then gives it ``worker_timeout`` rather than the start-up allowance."""
        try:
            self._sess.run(self._beat, options=tfv1.RunOptions(timeout_in_ms=int(timeout_s * 1000)))
        except tf.errors.OpError as e:
            raise RuntimeError(
                f"could not reach the parameter servers within {timeout_s:.0f} s: {e.message}"
            ) from None
        self._thread.start()
        atexit.register(self.stop)

    def _run(self) -> None:
        options = tfv1.RunOptions(timeout_in_ms=10_000)
        while not self._stopped.wait(self.interval):
            try:
                self._sess.run(self._beat, options=options)
            except tf.errors.OpError as e:  # a parameter server gone: the training step fails too
                logger.debug("Heartbeat not delivered: %s", e.message)

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join()

    def finish(self) -> None:
        """Stop the heartbeats, close the synchronous step's queues and leave the "finished"
        token on every parameter server."""
        self.stop()
        try:
            self._sess.run(self._finish, options=tfv1.RunOptions(timeout_in_ms=30_000))
        except tf.errors.OpError as e:
            logger.warning("Could not tell the parameter servers that this worker finished: %s", e.message)
        self._sess.close()


class _ClusterSessionCreator(tfv1.train.SessionCreator):
    """The chief initializes every variable; other workers only their own (on their task)."""

    def __init__(self, trainer, config):
        self.trainer = trainer
        self.config = config

    def create_session(self):
        t = self.trainer
        sess = tfv1.Session(t.server.target, config=self.config)
        if t.is_chief:
            init = [tfv1.global_variables_initializer(), tfv1.local_variables_initializer()]
        else:
            own = [v for v in tfv1.global_variables() if not _on_ps(v)]
            init = [tfv1.variables_initializer(own), tfv1.local_variables_initializer()]
        # The other tasks may still be starting: retry (initializers can run again) until they answer.
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            try:
                sess.run(init)
                return sess
            except tf.errors.UnavailableError as e:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the cluster did not answer within {READY_TIMEOUT_S} s: {e}"
                    ) from None
                time.sleep(0.5)


def _on_ps(v) -> bool:
    return tf.DeviceSpec.from_string(v.device).job == "ps"


class DistributedTrainerBase(SingleCostTrainer):
    """A worker of a synchronous TF-server job (not for direct use).

    Args:
        gpus: 1: one tower per worker process.
        server: this task's ``tf.train.Server`` (default: started from TF_CONFIG).
        config: a TrainConfig (the older form).
        worker_timeout: how long a parameter server waits for a heartbeat from a worker that has
            not finished before it ends the job (the same value in every task).
        pack_bytes: gradients (and, replicated, the updated variables) cross the network packed
            into buffers of about this size rather than one tensor at a time (0: unpacked; the
            same value in every worker).
    """

    _replicated = True

    def __init__(
        self,
        gpus=1,
        server=None,
        config=None,
        *,
        worker_timeout: float = WORKER_TIMEOUT_S,
        pack_bytes: int = DEFAULT_PACK_BYTES,
    ):
        if not worker_timeout > 0:
            raise ValueError(f"worker_timeout must be positive, got {worker_timeout!r}")
        if not (isinstance(pack_bytes, int) and pack_bytes >= 0):
            raise ValueError(f"pack_bytes must be an int >= 0 (0: no packing), got {pack_bytes!r}")
        self.worker_timeout = float(worker_timeout)
        self.pack_bytes = pack_bytes
        self.task = read_tf_config()
        self.server = server
        if self.task.job == "ps":
            try:
                run_parameter_server(server, self.task, self.worker_timeout)
            except WorkerLostError as e:
                logger.error("%s", e)
                sys.exit(1)
            logger.info("Parameter server task ends")
            sys.exit(0)
        if self.task.num_ps < 1:
            raise ValueError(
                f"{type(self).__name__} needs parameter servers: launch with `--backend tf-server --ps K`"
            )
        nr = gpus if isinstance(gpus, int) else len(gpus)
        if nr != 1:
            raise NotImplementedError(
                f"{type(self).__name__} builds one tower per worker process; got gpus={gpus!r}. "
                "Start one worker per GPU instead (launch --gpus ...)."
            )
        super().__init__(config)
        # Without it, RPCs to a dead task wait for it to come back: a worker left blocked on a
        # parameter server that ended the job (or died) would hang in session.close().
        os.environ.setdefault("GRPC_FAIL_FAST", "true")
        self.is_chief = self.task.is_chief
        gpus = tf.config.list_physical_devices("GPU")
        # With GPU index g pinned, the process sees that GPU as its GPU:0.
        self.gpu_index = local_gpu_index(len(gpus), placement().local_rank)
        self.device = f"{self.task.device}/device:{'GPU' if gpus else 'CPU'}:0"
        self._heartbeat = None

    def _setup_graph(self, input, get_cost_fn, get_opt_fn):
        task = self.task
        logger.info("Building worker %d of %d (%d ps) ...", task.index, task.num_workers, task.num_ps)
        if self._replicated:
            placement = self.device
        else:
            placement = tfv1.train.replica_device_setter(
                ps_tasks=task.num_ps, worker_device=self.device, cluster=tf.train.ClusterSpec(task.spec)
            )
        with tfv1.device(placement), TrainTowerContext(""):
            grads = self._make_get_grad_fn(input, get_cost_fn, get_opt_fn)()
        local_vars = [v for _, v in grads]
        grad_tensors = [tf.convert_to_tensor(g) for g, _ in grads]
        packer = GradientPacker.of(grad_tensors, self.pack_bytes)
        # What the gradients' queue holds, for the heartbeat's session to close it.
        self._grad_signature = (packer.dtypes, packer.shapes)
        targets = global_copies(local_vars, task.num_ps) if self._replicated else local_vars
        self._local_vars, self._targets = local_vars, targets
        with tf.device(self.device):
            opt = get_opt_fn()
            step = sync_apply_gradients(grad_tensors, targets, opt, task.num_workers, self.is_chief, packer)
            if self._replicated:
                step = pull_variables(local_vars, targets, step, self.pack_bytes)
            self.train_op = step
        return []

    def initialize(self, session_creator, session_init) -> None:
        user_config = session_creator.config if isinstance(session_creator, NewSessionCreator) else None
        session_config, server_config = worker_configs(self.task, user_config, self.gpu_index)
        if self.server is None:
            self.server = create_server(self.task, server_config)
        if isinstance(session_creator, NewSessionCreator):
            session_creator = _ClusterSessionCreator(self, session_config)
        interval = min(HEARTBEAT_S, self.worker_timeout / 4)
        self._heartbeat = _Heartbeat(self.server.target, self.task, interval, self._grad_signature)
        try:
            super().initialize(session_creator, session_init)
        except BaseException:
            self._heartbeat.stop()
            raise

    def _before_session_creation(self) -> None:
        super()._before_session_creation()
        task = self.task
        # The chief's values of all the variables each worker holds for itself (the global step,
        # batch-norm statistics, variables of callbacks: built last, so that these exist) go
        # through copies on the parameter servers to the other workers before the first step.
        pairs = list(zip(self._local_vars, self._targets, strict=True)) if self._replicated else []
        paired = {v.name for v, _ in pairs}
        own = [v for v in tfv1.global_variables() if not _on_ps(v) and v.name not in paired]
        unknown = [v.op.name for v in own if not v.shape.is_fully_defined()]
        if unknown:
            logger.warning("Variables without a fixed shape keep their own values: %s", unknown)
            own = [v for v in own if v.shape.is_fully_defined()]
        pairs += zip(own, chief_copies(own, task.num_ps), strict=True)
        with tf.device(self.device):
            ready = ready_queue(task.num_workers)
            if self.is_chief:
                with tf.control_dependencies([g.assign(v) for v, g in pairs]):
                    self._announce = ready.enqueue_many([tf.zeros([task.num_workers - 1], tf.int32)])
            else:
                self._wait_ready = ready.dequeue()
                self._copy_initial = tf.group(*[v.assign(g) for v, g in pairs], name="copy_from_chief")

    def _after_session_creation(self) -> None:
        super()._after_session_creation()
        self._heartbeat.start(READY_TIMEOUT_S)
        if self.is_chief:
            # The chief's variables (restored by session_init, if any) become everyone's.
            self.sess.run(self._announce)
            return
        logger.info("Waiting for the chief to initialize the variables ...")
        start = time.monotonic()
        try:
            self.sess.run(self._wait_ready, options=tfv1.RunOptions(timeout_in_ms=READY_TIMEOUT_S * 1000))
        except tf.errors.DeadlineExceededError:
            raise RuntimeError(
                f"the chief (worker 0) did not initialize the variables within {READY_TIMEOUT_S} s"
            ) from None
        logger.info("Variables are ready after %.1f s", time.monotonic() - start)
        self.sess.run(self._copy_initial)

    def run_step(self) -> None:
        try:
            super().run_step()
        except tf.errors.UnavailableError:
            logger.error(
                "Worker %d lost the cluster: a parameter server died, or ended the job because a "
                "worker stopped sending heartbeats (see its log)",
                self.task.index,
            )
            raise
        except (tf.errors.CancelledError, tf.errors.OutOfRangeError) as e:
            if not is_sync_queue_closed(e):
                raise
            logger.warning(
                "Worker %d stops at global_step %d: another worker has ended training (StopTraining, "
                "or it ran fewer steps; workers of a synchronous job run the same steps)",
                self.task.index,
                self.global_step,
            )
            # The step did not happen, but the global step's increment (run beside it) may have.
            tfv1.train.get_global_step(self.sess.graph).load(self.global_step, self.sess)
            raise StopTraining("another worker has ended training") from None

    def main_loop(self, *args, **kwargs) -> None:
        # "Finished" only when training ended normally: after a failure the heartbeats just stop,
        # and the parameter servers end the job.
        try:
            super().main_loop(*args, **kwargs)
        except BaseException:
            if self._heartbeat is not None:
                self._heartbeat.stop()
            raise
        if self._heartbeat is not None:
            self._heartbeat.finish()


class DistributedTrainerReplicated(DistributedTrainerBase):
    """Each worker keeps a local replica of the variables; the averaged gradients of all workers
    are applied to the global copy on the parameter servers, and the new values copied back."""

    _replicated = True


class DistributedTrainerParameterServer(DistributedTrainerBase):
    """The variables live on the parameter servers only; workers read them every step and the
    averaged gradients of all workers are applied to them once per step."""

    _replicated = False


class DistributedReplicatedTrainer(DistributedTrainerReplicated):
    """The reference's older form: ``DistributedReplicatedTrainer(config, server).train()``."""

    def __init__(
        self,
        config,
        server=None,
        *,
        worker_timeout: float = WORKER_TIMEOUT_S,
        pack_bytes: int = DEFAULT_PACK_BYTES,
    ):
        super().__init__(1, server, config, worker_timeout=worker_timeout, pack_bytes=pack_bytes)
