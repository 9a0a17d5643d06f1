"""Gradient processors: functions of a ``[(grad, var)]`` list run between computing the
gradients and applying them (clipping, scaling, summaries, checks).

Attach them to an optimizer with ``optimizer.apply_grad_processors(opt, [GlobalNormClip(5), ...])``.
Variables are matched by their op name (``conv1/W``) against a regex that must match it in full.
"""

from __future__ import annotations

import inspect
import re
import sys
import weakref

from . import logger
from .common import full_match
from .compat import tf, tfv1
from .summary import add_moving_summary, rms
from .tower import strip_tower_prefix

__all__ = [
    "CheckGradient",
    "FilterNoneGrad",
    "GlobalNormClip",
    "GradientProcessor",
    "MapGradient",
    "PrintGradient",
    "ScaleGradient",
    "SummaryGradient",
]


def _scale(grad, value: float):
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values * value, grad.indices, grad.dense_shape)
    return grad * value


class GradientProcessor:
    """Base class: ``process(grads)`` returns a new ``[(grad, var)]`` list made by ``_process``,
    in the name scope ``<ClassName>`` (created by the first call, re-entered by later ones)."""

    _name_scope: str | None = None

    def process(self, grads) -> list:
        grads = list(grads)
        if self._name_scope is None:
            with tfv1.name_scope(type(self).__name__) as scope:
                self._name_scope = scope
                return self._process(grads)
        with tfv1.name_scope(self._name_scope):
            return self._process(grads)

    def _process(self, grads) -> list:
        raise NotImplementedError(f"{type(self).__name__} must implement _process()")


class FilterNoneGrad(GradientProcessor):
    """Drop the pairs whose gradient is None (variables the cost does not depend on), with one
    warning naming them when ``verbose``."""

    def __init__(self, verbose: bool = True):
        self._verbose = verbose

    def _process(self, grads):
        kept = [(g, v) for g, v in grads if g is not None]
        dropped = [v.op.name for g, v in grads if g is None]
        if self._verbose and dropped:
            logger.warning("No gradient w.r.t %d trainable variables: %s", len(dropped), ", ".join(dropped))
        return kept


class GlobalNormClip(GradientProcessor):
    """Scale all gradients together so that their global norm (the norm of all of them as one
    vector) is at most ``global_norm`` (``tf.clip_by_global_norm``)."""

    def __init__(self, global_norm: float):
        self._norm = float(global_norm)

    def _process(self, grads):
        missing = [v.op.name for g, v in grads if g is None]
        if missing:
            raise ValueError(f"GlobalNormClip got None gradients for {missing}; put FilterNoneGrad() first")
        clipped, _ = tf.clip_by_global_norm([g for g, _ in grads], self._norm, name="clip_by_global_norm")
        return list(zip(clipped, [v for _, v in grads], strict=True))


class MapGradient(GradientProcessor):
    """Apply ``func`` to the gradients of the variables whose op name matches ``regex`` in full;
    the others pass unchanged. ``func`` takes ``grad`` or ``(grad, var)`` and returns the new
    gradient, or None to drop it (the variable is then not updated). Warns when no variable
    matches."""

    def __init__(self, func, regex: str = ".*"):
        try:
            params = inspect.signature(func).parameters.values()
        except (TypeError, ValueError) as e:
            raise TypeError(f"MapGradient needs a function, got {func!r}") from e
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(positional) not in (1, 2):
            raise ValueError(
                f"MapGradient's function must take 1 argument (grad) or 2 (grad, var), "
                f"{func!r} takes {[p.name for p in positional]}"
            )
        self.func = func if len(positional) == 2 else (lambda grad, var: func(grad))
        self.regex = regex

    def _process(self, grads):
        out, matched = [], False
        for grad, var in grads:
            if full_match(self.regex, var.op.name):
                matched = True
                grad = self.func(grad, var)
                if grad is None:
                    continue
            out.append((grad, var))
        if not matched:
            logger.warning("[MapGradient] No match was found for regex %s.", self.regex)
        return out


class _OncePerGraph:
    """Names already handled in a graph (summaries and prints are added once per variable)."""

    def __init__(self):
        self._seen: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def first(self, name: str) -> bool:
        seen = self._seen.setdefault(tfv1.get_default_graph(), set())
        if name in seen:
            return False
        seen.add(name)
        return True


class SummaryGradient(MapGradient):
    """For each matching variable, once per graph: a histogram ``<var>-grad`` of its gradient
    and a moving-average summary of the gradient's RMS (op ``<var>/rms``). Replicas of other
    towers (``tower<k>/...``) are skipped."""

    _done = _OncePerGraph()

    def __init__(self, regex: str = ".*", collections=None):
        super().__init__(self._mapper, regex)
        self._collections = collections

    def _mapper(self, grad, var):
        name = var.op.name
        if strip_tower_prefix(name) != name or not self._done.first(name):
            return grad
        dense = tf.convert_to_tensor(grad)
        tfv1.summary.histogram(name + "-grad", dense, collections=self._collections)
        add_moving_summary(rms(dense, name=name + "/rms"))
        return grad


class PrintGradient(MapGradient):
    """For each matching variable, once per graph: print (to stderr, when the gradient is
    computed) its shape, mean, RMS and first 20 values, after the message ``<var>-grad``."""

    _done = _OncePerGraph()

    def __init__(self, regex: str = ".*"):
        super().__init__(self._mapper, regex)

    def _mapper(self, grad, var):
        name = var.op.name
        if not self._done.first(name):
            return grad
        dense = tf.convert_to_tensor(grad)
        show = tf.print(
            name + "-grad",
            tf.shape(dense),
            tf.reduce_mean(dense),
            rms(dense),
            dense,
            summarize=20,
            output_stream=sys.stderr,
        )
        with tf.control_dependencies([show]):
            return tf.identity(dense, name="print_" + re.sub(r"[^A-Za-z0-9_.\-/]", "_", name))


class CheckGradient(MapGradient):
    """Fail the step (``InvalidArgumentError`` naming ``CheckGradient/<var>``) when a gradient
    holds NaN or Inf."""

    def __init__(self):
        super().__init__(self._mapper)

    def _mapper(self, grad, var):
        return tf.debugging.check_numerics(tf.convert_to_tensor(grad), "CheckGradient/" + var.op.name)


class ScaleGradient(MapGradient):
    """Multiply gradients by per-variable factors: ``multipliers`` is a ``(regex, factor)`` pair
    or a list of them; the first regex that matches a variable's name in full wins, and a factor
    of 0 drops the gradient. Logs each multiplier applied when ``verbose``.

    Example (twice the learning rate for biases): ``ScaleGradient(('.*/b', 2))``
    """

    def __init__(self, multipliers, verbose: bool = True):
        if not isinstance(multipliers, list):
            multipliers = [multipliers]
        for item in multipliers:
            if not (isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str)):
                raise TypeError(f"ScaleGradient takes (regex, factor) pairs, got {item!r}")
        if not isinstance(verbose, bool):
            raise TypeError(f"verbose must be a bool, got {verbose!r}")
        self.multipliers = [(regex, float(factor)) for regex, factor in multipliers]
        self._verbose = verbose
        super().__init__(self._mapper)

    def _mapper(self, grad, var):
        name = var.op.name
        for regex, factor in self.multipliers:
            if full_match(regex, name):
                if self._verbose:
                    logger.info("Apply lr multiplier %s for %s", factor, name)
                return _scale(grad, factor) if factor != 0 else None
        return grad
