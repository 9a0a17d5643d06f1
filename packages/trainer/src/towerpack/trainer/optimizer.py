"""Optimizer wrappers: ``tf.compat.v1.train.Optimizer``s that add something around another
optimizer's update — gradient processors, a per-variable step after the update, or gradient
accumulation over several steps.

Every wrapper is itself an optimizer, so wrappers nest and any trainer (or plain TF code) uses
them like the optimizer they wrap.
"""

from __future__ import annotations

from .compat import tf, tfv1
from .gradproc import FilterNoneGrad, GradientProcessor

__all__ = [
    "AccumGradOptimizer",
    "PostProcessOptimizer",
    "ProxyOptimizer",
    "VariableAssignmentOptimizer",
    "apply_grad_processors",
]


class ProxyOptimizer(tfv1.train.Optimizer):
    """An optimizer that forwards ``compute_gradients``, ``apply_gradients``, ``get_slot``,
    ``get_slot_names`` and ``variables`` to ``opt``; subclasses change some of them."""

    def __init__(self, opt, name: str = "ProxyOptimizer"):
        if not isinstance(opt, tfv1.train.Optimizer):
            raise TypeError(f"{type(self).__name__} wraps a tf.compat.v1.train.Optimizer, got {opt!r}")
        super().__init__(False, name)
        self._opt = opt

    def compute_gradients(self, *args, **kwargs):
        return self._opt.compute_gradients(*args, **kwargs)

    def get_slot(self, *args, **kwargs):
        return self._opt.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._opt.get_slot_names(*args, **kwargs)

    def variables(self):
        return self._opt.variables()

    def apply_gradients(self, *args, **kwargs):
        return self._opt.apply_gradients(*args, **kwargs)


class _GradientProcessorOptimizer(ProxyOptimizer):
    def __init__(self, opt, gradprocs):
        super().__init__(opt)
        self._gradprocs = list(gradprocs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads = list(grads_and_vars)
        for proc in self._gradprocs:
            grads = proc.process(grads)
        return self._opt.apply_gradients(grads, global_step, name)


def apply_grad_processors(opt, gradprocs) -> ProxyOptimizer:
    """An optimizer that runs the gradient processors ``gradprocs`` (a list or tuple), in order,
    on the gradients before ``opt`` applies them."""
    if not isinstance(gradprocs, (list, tuple)):
        raise TypeError(f"apply_grad_processors takes a list of GradientProcessors, got {gradprocs!r}")
    for proc in gradprocs:
        if not isinstance(proc, GradientProcessor):
            raise TypeError(f"apply_grad_processors takes GradientProcessors, got {proc!r}")
    return _GradientProcessorOptimizer(opt, gradprocs)


class PostProcessOptimizer(ProxyOptimizer):
    """After ``opt``'s update, run ``func(var)`` for every updated variable: it returns an op
    (e.g. a clipping assignment) or None. The step is the group of the update and those ops.

    ``colocate`` is accepted for compatibility; the ops are placed with their variables anyway.
    """

    def __init__(self, opt, func, colocate: bool = True):
        super().__init__(opt)
        self._func = func
        self._colocate = colocate

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = list(grads_and_vars)
        update = self._opt.apply_gradients(grads_and_vars, global_step)
        ops = []
        with tf.control_dependencies([update]):
            for _, var in grads_and_vars:
                op = self._func(var)
                if op is None:
                    continue
                if not isinstance(op, tf.Operation):
                    raise TypeError(
                        f"{type(self).__name__}: the function must return a tf.Operation or None for "
                        f"{var.op.name}, got {op!r}"
                    )
                ops.append(op)
        return tf.group(update, *ops, name=name)


class VariableAssignmentOptimizer(PostProcessOptimizer):
    """After ``opt``'s update, assign ``func(var)`` to every updated variable for which it is
    not None (e.g. ``lambda v: tf.clip_by_value(v, -1, 1)``)."""

    def __init__(self, opt, func):
        def assign(var):
            value = func(var)
            if value is None:
                return None
            op = var.assign(value, use_locking=False, read_value=False)
            return op if isinstance(op, tf.Operation) else op.op

        super().__init__(opt, assign)


class AccumGradOptimizer(ProxyOptimizer):
    """Accumulate the gradients of ``niter`` consecutive ``apply_gradients`` runs and let ``opt``
    apply their sum on every ``niter``-th run (the other runs change only the accumulators).

    The sum of ``niter`` gradients at batch ``b`` is what ``niter`` times the learning rate
    would apply at batch ``niter * b``, so training at batch ``b`` with ``AccumGradOptimizer(opt,
    k)`` follows training at batch ``k * b`` with ``k`` times the learning rate, using the
    memory of batch ``b``. With ``average=True`` the mean is applied instead, which follows
    batch ``k * b`` at the same learning rate.

    Creates a zero-initialized slot ``<var>/AccumGrad`` per variable and an int32 counter
    ``AccumGrad/counter``. Every call of ``apply_gradients`` builds one step: with a
    multi-device trainer that updates all replicas in one call, every replica accumulates and
    updates on the same steps. A ``global_step`` passed in is incremented on every run.
    """

    def __init__(self, opt, niter: int, *, average: bool = False):
        super().__init__(opt, "AccumGrad")
        if isinstance(niter, bool) or int(niter) != niter or niter < 1:
            raise ValueError(f"niter must be a positive integer, got {niter!r}")
        self._niter = int(niter)
        self._average = bool(average)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        grads_and_vars = FilterNoneGrad().process(grads_and_vars)
        for g, v in grads_and_vars:
            if not isinstance(g, (tf.Tensor, tf.IndexedSlices)) or not isinstance(v, tf.Variable):
                raise TypeError(
                    f"AccumGradOptimizer cannot accumulate the gradient of {v!r}: the gradient is a "
                    f"{type(g).__name__} and the variable a {type(v).__name__}"
                )
        variables = [v for _, v in grads_and_vars]
        # Outside any control dependency: the slots and the counter must be initializable alone.
        with tf.control_dependencies(None):
            slots = [self._zeros_slot(v, "accum", self._name) for v in variables]
            with tfv1.variable_scope(self._name), tf.device("/cpu:0"):
                counter = tfv1.Variable(0, name="counter", trainable=False, dtype=tf.int32)

        with tfv1.name_scope("AccumGradOptimizer"):
            accumulate = [
                s.scatter_add(g) if isinstance(g, tf.IndexedSlices) else s.assign_add(g)
                for s, (g, _) in zip(slots, grads_and_vars, strict=True)
            ]
            # The predicate reads the counter's new value, so it is ordered after the increment.
            with tf.control_dependencies(accumulate):
                count = counter.assign_add(1, name="update_counter")
            ready = tf.equal(tf.math.floormod(count, self._niter), 0)

            def apply_accumulated():
                sums = [s.read_value() for s in slots]
                if self._average:
                    sums = [g / tf.cast(self._niter, g.dtype) for g in sums]
                update = self._opt.apply_gradients(list(zip(sums, variables, strict=True)))
                with tf.control_dependencies([update]):
                    clear = [s.assign(tf.zeros(s.shape, s.dtype.base_dtype), read_value=False) for s in slots]
                with tf.control_dependencies(clear):
                    return tf.constant(True)

            def keep_accumulating():
                return tf.constant(False)

            step = [tf.cond(ready, apply_accumulated, keep_accumulating, name="update_grad")]
            if global_step is not None:
                step.append(tfv1.assign_add(global_step, 1))
        return tf.group(*step, name=name or "cond_update_grad")
