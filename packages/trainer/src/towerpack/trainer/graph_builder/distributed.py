"""Graph pieces of synchronous training on a ``tf.train.Server`` cluster.

Every worker pushes its gradients into a queue hosted on the first parameter server; the chief
takes one entry per worker, averages them, applies the average to the global variables and
then releases the other workers with one token each. The chief's part runs on that parameter
server, next to the queue, so that only the workers' gradients and the updated variables cross
the network (averaging on the chief sent every gradient three times more, with more round
trips). Queues shared between the workers' graphs are matched by ``shared_name`` on the same
device. A worker that ends training closes both queues, so that the others end at the same step
instead of waiting for it forever.
"""

from __future__ import annotations

from ..compat import tf, tfv1
from .packing import DEFAULT_PACK_BYTES, GradientPacker

__all__ = [
    "STATUS_QUEUE",
    "SYNC_QUEUES",
    "chief_copies",
    "close_sync_queues",
    "global_copies",
    "is_sync_queue_closed",
    "ps_device",
    "pull_variables",
    "ready_queue",
    "status_queue",
    "sync_apply_gradients",
    "sync_queues",
]

STATUS_QUEUE = "towerpack_worker_status"
SYNC_QUEUES = ("towerpack_grads", "towerpack_tokens")


def ps_device(index: int) -> str:
    """The CPU of parameter server ``index``, fully named: a worker's device scope (its GPU) must not
    leak into it, since a parameter server has no GPU."""
    return f"/job:ps/task:{index}/device:CPU:0"


def _queue(name: str, dtypes, shapes, capacity: int, device: str):
    with tf.device(device):
        return tfv1.FIFOQueue(capacity, dtypes, shapes, shared_name=name, name=name)


def status_queue(ps_index: int, num_workers: int):
    """Where workers tell parameter server ``ps_index`` that they are alive, and when they have
    finished: entries ``(worker index, finished)``."""
    return _queue(
        f"{STATUS_QUEUE}_{ps_index}",
        [tf.int32, tf.bool],
        [[], []],
        64 * num_workers,
        ps_device(ps_index),
    )


def ready_queue(num_workers: int):
    """The chief puts one token per other worker here once the global variables are initialized."""
    return _queue("towerpack_ready", [tf.int32], [[]], max(num_workers, 1), ps_device(0))


def _ps_copies(variables: list, num_ps: int, prefix: str, **kwargs) -> list:
    """An untrainable, zero-initialized ``<prefix>/<name>`` per variable, spread over the ps tasks."""
    out = []
    for k, v in enumerate(variables):
        with tf.device(ps_device(k % num_ps)):
            out.append(
                tfv1.get_variable(
                    f"{prefix}/{v.op.name}",
                    shape=v.shape,
                    dtype=v.dtype.base_dtype,
                    initializer=tfv1.zeros_initializer(),
                    trainable=False,
                    **kwargs,
                )
            )
    return out


def global_copies(local_vars: list, num_ps: int) -> list:
    """One untrainable variable per local variable, named ``global/<name>``, spread over the ps tasks."""
    return _ps_copies(local_vars, num_ps, "global")


def chief_copies(variables: list, num_ps: int) -> list:
    """One variable per variable, named ``from_chief/<name>``, spread over the ps tasks: the chief
    writes its values there for the other workers to start from. They are in no collection, so
    no worker initializes them (over the chief's values) and no checkpoint holds them."""
    return _ps_copies(variables, num_ps, "from_chief", collections=[])


def sync_queues(dtypes: list, shapes: list, num_workers: int):
    """The two queues of the synchronous step: the workers' gradients (``dtypes`` and ``shapes``
    of one worker's), and the chief's tokens that release the other workers."""
    grad_q = _queue(SYNC_QUEUES[0], dtypes, shapes, num_workers, ps_device(0))
    token_q = _queue(SYNC_QUEUES[1], [tf.int32], [[]], max(num_workers - 1, 1), ps_device(0))
    return grad_q, token_q


def close_sync_queues(dtypes: list, shapes: list, num_workers: int):
    """The op that ends synchronous training for every worker: once the queues are closed, a
    worker's next step fails with an error naming one of ``SYNC_QUEUES`` (see
    :func:`is_sync_queue_closed`). Steps already released are not affected."""
    return tf.group(
        *[q.close(cancel_pending_enqueues=True) for q in sync_queues(dtypes, shapes, num_workers)]
    )


def is_sync_queue_closed(error) -> bool:
    """Whether a step failed because another worker closed the synchronous step's queues."""
    if not isinstance(error, tf.errors.CancelledError | tf.errors.OutOfRangeError):
        return False
    return "closed" in error.message and any(name in error.message for name in SYNC_QUEUES)


def sync_apply_gradients(grads: list, target_vars: list, opt, num_workers: int, is_chief: bool, packer=None):
    """The op of one synchronous step: every worker's gradients averaged and applied once.

    ``grads`` are this worker's gradients for ``target_vars`` (the variables on the parameter
    servers). With a :class:`~.packing.GradientPacker` of ``grads``, they travel as its buffers.
    Returns an op that finishes once the update of this step is in ``target_vars``.
    """
    sent = packer.pack(grads) if packer is not None else grads
    grad_q, token_q = sync_queues([g.dtype for g in sent], [g.shape for g in sent], num_workers)
    push = grad_q.enqueue(sent, name="push_gradients")
    if not is_chief:
        with tf.control_dependencies([push]):
            return token_q.dequeue(name="wait_for_update").op
    # The chief's part runs where the queues are (see the module docstring).
    with tf.device(ps_device(0)):
        # One entry at a time: dequeue_many would copy them into one stacked tensor first.
        with tf.control_dependencies([push]):
            entries = [grad_q.dequeue(name="take_gradients") for _ in range(num_workers)]
        entries = [e if isinstance(e, (list, tuple)) else [e] for e in entries]
        with tf.name_scope("average_gradients"):
            averaged = [tf.add_n(list(parts)) / num_workers for parts in zip(*entries, strict=True)]
            averaged = packer.unpack(averaged) if packer is not None else averaged
        apply = opt.apply_gradients(list(zip(averaged, target_vars, strict=True)), name="apply_gradients")
        if num_workers == 1:
            return apply
        with tf.control_dependencies([apply]):
            return token_q.enqueue_many([tf.zeros([num_workers - 1], tf.int32)], name="release_workers")


def pull_variables(local_vars: list, global_vars: list, after, threshold_bytes: int = DEFAULT_PACK_BYTES):
    """The op that copies ``global_vars`` (on the parameter servers) into ``local_vars`` once ``after``
    has run: each parameter server sends its variables packed into a few buffers of about
    ``threshold_bytes`` (0: one by one)."""
    by_task: dict[str, list[int]] = {}
    for i, g in enumerate(global_vars):
        by_task.setdefault(tf.DeviceSpec.from_string(g.device).task, []).append(i)
    assigns = []
    for task, indices in by_task.items():
        with tf.device(ps_device(task)), tf.control_dependencies([after]):
            values = [global_vars[i].read_value() for i in indices]
            packer = GradientPacker.of(values, threshold_bytes)
            buffers = packer.pack(values)
        for i, value in zip(indices, packer.unpack(buffers), strict=True):
            assigns.append(local_vars[i].assign(value, read_value=False))
    return tf.group(*assigns, name="copy_back")
