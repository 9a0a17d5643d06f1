"""Hyperparameter setters: change a graph variable or a Python attribute on a schedule or by a function."""

from __future__ import annotations

import bisect
import itertools
import logging

import numpy as np

from ..compat import tfv1
from .base import Callback

logger = logging.getLogger("towerpack.trainer.callbacks")

__all__ = [
    "GraphVarParam",
    "HyperParam",
    "HyperParamSetter",
    "HyperParamSetterWithFunc",
    "ObjAttrParam",
    "ScheduledHyperParamSetter",
]


class HyperParam:
    """Something a :class:`HyperParamSetter` can read and write."""

    def setup_graph(self) -> None:
        """Create what setting needs in the graph (called before it is finalized)."""

    def set_value(self, value) -> None:
        raise NotImplementedError

    def get_value(self):
        raise NotImplementedError

    @property
    def readable_name(self) -> str:
        raise NotImplementedError


class GraphVarParam(HyperParam):
    """A (scalar by default) variable in the graph, found by name, e.g. ``"learning_rate"``."""

    def __init__(self, name: str, shape=()):
        self.name = name
        self.var_name = name if ":" in name else name + ":0"
        self.shape = shape

    def setup_graph(self) -> None:
        found = [v for v in tfv1.global_variables() if v.name == self.var_name]
        if not found:
            names = sorted(v.name for v in tfv1.global_variables())
            raise ValueError(
                f"GraphVarParam: no variable named '{self.var_name}' in the graph; it has {names}"
            )
        self.var = found[0]
        with tfv1.name_scope(None):
            self._value_ph = tfv1.placeholder(self.var.dtype.base_dtype, shape=self.shape)
            self._assign_op = self.var.assign(self._value_ph, read_value=False)

    def set_value(self, value) -> None:
        _default_session().run(self._assign_op, {self._value_ph: value})

    def get_value(self):
        return _default_session().run(self.var)

    @property
    def readable_name(self) -> str:
        return self.name.split(":")[0]


class ObjAttrParam(HyperParam):
    """An attribute of a Python object (e.g. a data augmentor's strength)."""

    def __init__(self, obj, attrname: str, readable_name: str | None = None):
        self.obj = obj
        self.attrname = attrname
        self._readable_name = readable_name or attrname

    def set_value(self, value) -> None:
        setattr(self.obj, self.attrname, value)

    def get_value(self):
        return getattr(self.obj, self.attrname)

    @property
    def readable_name(self) -> str:
        return self._readable_name


def _default_session():
    sess = tfv1.get_default_session()
    if sess is None:
        raise RuntimeError("a graph hyperparameter can only be read or set inside the training session")
    return sess


class HyperParamSetter(Callback):
    """Base class: sets ``param`` to ``_get_value_to_set()`` before training and after every epoch.

    ``param`` is a :class:`HyperParam` or the name of a graph variable. A value of ``None``
    means "leave it as it is". Runs on every process (not chief-only): each process has its
    own copy of the hyperparameter.
    """

    _chief_only = False

    def __init__(self, param):
        self.param = GraphVarParam(param) if isinstance(param, str) else param
        if not isinstance(self.param, HyperParam):
            raise TypeError(f"param must be a HyperParam or a variable name, got {type(param).__name__}")

    def _setup_graph(self) -> None:
        self.param.setup_graph()

    def get_value_to_set(self):
        """The value the parameter should have now, or None to leave it alone."""
        return self._get_value_to_set()

    def _get_value_to_set(self):
        raise NotImplementedError

    def get_current_value(self):
        """The parameter's value as it is now."""
        return self.param.get_value()

    def set_param(self) -> None:
        self._set(self.get_value_to_set())

    def _set(self, value) -> None:
        if value is None:
            return
        old = self.get_current_value()
        if _same(old, value):
            return
        self.param.set_value(value)
        logger.info(
            "[HyperParamSetter] at global step %s, %s changes from %s to %s",
            self._global_step_now(),
            self.param.readable_name,
            _fmt(old),
            _fmt(value),
        )

    def _global_step_now(self):
        return getattr(getattr(self, "trainer", None), "global_step", None)

    def _before_train(self) -> None:
        self.set_param()

    def _trigger(self) -> None:
        self.set_param()


def _same(a, b) -> bool:
    try:
        return bool(np.all(np.asarray(a) == np.asarray(b)))
    except (TypeError, ValueError):
        return False


def _fmt(v) -> str:
    v = np.asarray(v)
    return f"{v.item():.6g}" if v.size == 1 and np.issubdtype(v.dtype, np.number) else str(v.tolist())


class HyperParamSetterWithFunc(HyperParamSetter):
    """Set the parameter to ``func(epoch_num, old_value)`` before training and after each epoch.

    Before training ``epoch_num`` is the number of epochs already finished (``starting_epoch - 1``).
    """

    def __init__(self, param, func):
        super().__init__(param)
        self.f = func

    def _get_value_to_set(self):
        return self.f(self.epoch_num, self.get_current_value())


class ScheduledHyperParamSetter(HyperParamSetter):
    """Set the parameter from a schedule of ``(point, value)`` pairs.

    A point is an epoch number (the value applies *after* that epoch finishes; 0 means from the
    start) or, with ``step_based=True``, a global step. With ``interp='linear'`` values between
    two points are interpolated. Before training (and so after a resume) the parameter is set
    to what the schedule gives at the current point, so a resumed run continues with the right
    value; ``set_at_beginning=False`` skips that.
    """

    def __init__(
        self,
        param,
        schedule,
        interp: str | None = None,
        step_based: bool = False,
        set_at_beginning: bool = True,
    ):
        super().__init__(param)
        schedule = [(int(p), v) for p, v in schedule]
        if not schedule:
            raise ValueError("the schedule is empty")
        if any(b[0] <= a[0] for a, b in itertools.pairwise(schedule)):
            raise ValueError(f"schedule points must increase strictly: {[p for p, _ in schedule]}")
        if interp not in (None, "linear"):
            raise ValueError(f"interp must be None or 'linear', got {interp!r}")
        self.schedule = schedule
        self.interp = interp
        self.step_based = step_based
        self._set_at_beginning = set_at_beginning
        self._points = [p for p, _ in schedule]

    def value_at(self, point: int):
        """The scheduled value at ``point`` (None before the first scheduled point)."""
        i = bisect.bisect_right(self._points, point) - 1
        if i < 0:
            return None
        p0, v0 = self.schedule[i]
        if self.interp is None or p0 == point or i == len(self.schedule) - 1:
            return v0
        p1, v1 = self.schedule[i + 1]
        return v0 + (v1 - v0) * (point - p0) / (p1 - p0)

    def _current_point(self) -> int:
        return self.global_step if self.step_based else self.epoch_num

    def _get_value_to_set(self):
        point = self._current_point()
        if self.interp is None and point not in self._points:
            return None  # between schedule points nothing changes
        return self.value_at(point)

    def _before_train(self) -> None:
        if not self._set_at_beginning:
            return
        point = self.epoch_num
        if self.step_based:
            # Read the variable: the trainer's counter may not reflect a restored step yet.
            step_var = tfv1.train.get_global_step()
            point = int(_default_session().run(step_var)) if step_var is not None else self.global_step
        self._set(self.value_at(point))

    def _trigger_step(self) -> None:
        if self.step_based:
            self.set_param()

    def _trigger(self) -> None:
        if not self.step_based:
            self.set_param()
