"""A session creator for a worker of a ``tf.train.Server`` cluster whose graph the user built
(between-graph replication, variables on the parameter servers), as the reference's
``tfutils.distributed``.

Sessions are opened and initialized as the TF-server trainers do (``tf_server_trainer``): the
chief (worker 0) initializes every variable, the other workers the variables of their own task
and the local ones, each retrying while the cluster is still starting. A worker other than the
chief then waits until the chief has initialized the variables on the parameter servers, so the
session it gets is ready to use.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

from . import logger
from .cluster import ClusterTask
from .compat import tf, tfv1
from .tf_server_trainer import READY_TIMEOUT_S, _ClusterSessionCreator, _on_ps, worker_configs

__all__ = ["get_distributed_session_creator"]

_POLL_S = 0.2


def _task_of(server) -> ClusterTask:
    server_def = getattr(server, "server_def", None)
    if server_def is None:
        raise TypeError(
            f"get_distributed_session_creator takes a tf.train.Server, got {type(server).__name__}"
        )
    spec = tf.train.ClusterSpec(server_def.cluster).as_dict()
    spec = {
        job: list(tasks.values()) if isinstance(tasks, dict) else list(tasks) for job, tasks in spec.items()
    }
    return ClusterTask(spec, server_def.job_name, server_def.task_index)


class _ServerSessionCreator(tfv1.train.SessionCreator):
    def __init__(self, server, task: ClusterTask, config, timeout: float):
        self.task = task
        self.timeout = timeout
        # The trainers' creator reads only the server and whether this task is the chief.
        self._creator = _ClusterSessionCreator(SimpleNamespace(server=server, is_chief=task.is_chief), config)

    def create_session(self):
        sess = self._creator.create_session()
        if not self.task.is_chief:
            try:
                self._wait_for_chief(sess)
            except BaseException:
                sess.close()
                raise
        return sess

    def _wait_for_chief(self, sess) -> None:
        on_ps = [v for v in tfv1.global_variables() if _on_ps(v)]
        if not on_ps:
            return
        pending = tfv1.report_uninitialized_variables(on_ps)
        deadline = time.monotonic() + self.timeout
        missing = sess.run(pending)
        if len(missing):
            logger.info(
                "Worker %d waits for the chief to initialize %d variable(s)", self.task.index, len(missing)
            )
        while len(missing):
            if time.monotonic() > deadline:
                names = ", ".join(m.decode() for m in missing[:10])
                raise RuntimeError(
                    f"worker {self.task.index}: the chief (worker 0) did not initialize {len(missing)} "
                    f"variable(s) on the parameter servers within {self.timeout:g} s: {names}"
                )
            time.sleep(_POLL_S)
            missing = sess.run(pending)


def get_distributed_session_creator(server, config=None, timeout: float = READY_TIMEOUT_S):
    """A ``SessionCreator`` for this worker of ``server``'s cluster, whose sessions have every
    variable of the default graph initialized.

    Call it in each worker once its graph is built (variables on the parameter servers, e.g.
    through ``tf.compat.v1.train.replica_device_setter``); pass the creator to a trainer or to
    ``tf.compat.v1.train.MonitoredSession``. The chief (job ``worker``, task 0) initializes all
    variables; another worker initializes those of its own task and the local ones, then waits
    for the chief.

    Args:
        server: this task's ``tf.train.Server``, of job ``worker``.
        config: the session's ``ConfigProto`` (a copy is used; it sees only the parameter
            servers and this task).
        timeout: seconds a worker waits for the chief before it raises RuntimeError.
    """
    task = _task_of(server)
    if task.job != "worker":
        raise ValueError(
            f"get_distributed_session_creator runs in a worker task; this server is {task.job}:{task.index} "
            "(a parameter server serves with server.join())"
        )
    if not timeout > 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    session_config, _ = worker_configs(task, config, None)
    return _ServerSessionCreator(server, task, session_config, float(timeout))
