"""Hyperparameter setters: change a graph variable or a Python attribute during training.

From a schedule, a function of the epoch, a file a person edits, or when a monitored scalar
stops improving. A string parameter names a graph variable (``GraphVarParam``).
"""

from __future__ import annotations

import bisect
import itertools
import logging
import numbers
import os
from collections import deque

import numpy as np

from ..callback import Callback
from ..compat import tfv1
from ..logger import get_logger_dir

logger = logging.getLogger("towerpack.trainer.callbacks")

__all__ = [
    "GraphVarParam",
    "HumanHyperParamSetter",
    "HyperParam",
    "HyperParamSetter",
    "HyperParamSetterWithFunc",
    "ObjAttrParam",
    "ScheduledHyperParamSetter",
    "StatMonitorParamSetter",
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
    """A (scalar by default) global or local variable in the graph, found by name, e.g.
    ``"learning_rate"``."""

    def __init__(self, name: str, shape=()):
        self.name = name
        self.var_name = name if ":" in name else name + ":0"
        self.shape = shape

    def setup_graph(self) -> None:
        variables = tfv1.global_variables() + tfv1.local_variables()
        found = [v for v in variables if v.name == self.var_name]
        if not found:
            names = sorted(v.name for v in variables)
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
    _logged_epoch = object()  # no change logged yet

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
        """Set any value but None (as the reference does, also one equal to the current value);
        a change is logged, once per epoch (step-based schedules change often)."""
        if value is None:
            return
        old = self.get_current_value()
        self.param.set_value(value)
        if _same(old, value):
            return
        # Before training (set_param from user code) there is no trainer yet.
        trainer = self.trainer
        epoch = trainer.epoch_num if trainer is not None else None
        if epoch != self._logged_epoch:
            self._logged_epoch = epoch
            logger.info(
                "[HyperParamSetter] at global step %s, %s changes from %s to %s",
                trainer.global_step if trainer is not None else None,
                self.param.readable_name,
                _fmt(old),
                _fmt(value),
            )

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
    start) or, with ``step_based=True``, a global step. The schedule is sorted by point. With
    ``interp='linear'`` the value between two points is interpolated; before the first point and
    after the last the setter leaves the parameter alone.

    Before training (so also after a resume), the parameter gets the value scheduled for the
    current point, then it is compared with the value the schedule says it should have by now
    (the last one scheduled at or before the current point). If they differ, a warning says so
    and, with ``set_at_beginning=True`` (the default), the parameter is set to the scheduled
    value; otherwise the warning asks to check how the parameter is initialized.
    (Unlike the reference, a scheduled value of 0 counts in that comparison.) A point given twice keeps
    its first value, with a warning.
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
        schedule = sorted(((int(p), _number_or_value(v)) for p, v in schedule), key=lambda pv: pv[0])
        if not schedule:
            raise ValueError("the schedule is empty")
        repeated = sorted({a for (a, _), (b, _) in itertools.pairwise(schedule) if a == b})
        if repeated:
            # As the reference: the first value given for a point is the one set (scripts that compute
            # their points by integer division repeat them on small configurations).
            schedule = [pv for i, pv in enumerate(schedule) if i == 0 or schedule[i - 1][0] != pv[0]]
            logger.warning(
                "ScheduledHyperParamSetter(%s): schedule point(s) %s appear more than once; the first "
                "value given for each is used: %s",
                self.param.readable_name,
                repeated,
                schedule,
            )
        if interp not in (None, "linear"):
            raise ValueError(f"interp must be None or 'linear', got {interp!r}")
        self.schedule = schedule
        self.interp = interp
        self.step_based = step_based
        self._set_at_beginning = set_at_beginning
        self._points = [p for p, _ in schedule]

    def value_at(self, point: int):
        """The value the schedule gives the parameter at ``point``: the last one scheduled at or
        before it (interpolated with ``interp='linear'``), or None before the first point."""
        i = bisect.bisect_right(self._points, point) - 1
        if i < 0:
            return None
        p0, v0 = self.schedule[i]
        if self.interp is None or p0 == point or i == len(self.schedule) - 1:
            return v0
        p1, v1 = self.schedule[i + 1]
        return (point - p0) / (p1 - p0) * (v1 - v0) + v0

    def _value_to_set_at(self, point: int):
        """What the setter sets at ``point``: a scheduled value, an interpolated one between the
        first and the last point, or None (leave the parameter as it is)."""
        if point in self._points or (
            self.interp is not None and self._points[0] <= point <= self._points[-1]
        ):
            return self.value_at(point)
        return None

    def _current_point(self) -> int:
        return self.global_step if self.step_based else self.epoch_num

    def _get_value_to_set(self):
        return self._value_to_set_at(self._current_point())

    def _before_train(self) -> None:
        point = self._current_point()
        self._set(self._value_to_set_at(point))
        self._check_value_at_beginning(point)

    def _check_value_at_beginning(self, point: int) -> None:
        expected = self.value_at(point)
        if expected is None:
            return
        actual = self.get_current_value()
        if _close(expected, actual):
            return
        name = self.param.readable_name
        where = f"step {point}" if self.step_based else f"epoch {point}"
        message = (
            "[ScheduledHyperParamSetter] according to the schedule, %s should become %s at the "
            "current point (%s), but it is %s. "
        )
        if self._set_at_beginning:
            logger.warning(
                message + "Setting it to %s.", name, _fmt(expected), where, _fmt(actual), _fmt(expected)
            )
            self._set(expected)
        else:
            logger.warning(
                message + "If no other callback sets it, check how the parameter is initialized.",
                name,
                _fmt(expected),
                where,
                _fmt(actual),
            )

    def _uses_trigger_step(self) -> bool:
        return self.step_based

    def _trigger_step(self) -> None:
        if self.step_based:
            self.set_param()

    def _trigger(self) -> None:
        if not self.step_based:
            self.set_param()


def _number_or_value(v):
    """Numbers become floats (as the reference stores them); other values stay as they are."""
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        return float(v)
    return v


def _close(a, b) -> bool:
    try:
        return bool(np.all(np.isclose(a, b)))
    except TypeError:
        return _same(a, b)


class HumanHyperParamSetter(HyperParamSetter):
    """Set the parameter from a file a person edits during training.

    Before training and at every trigger (by default, after every epoch) it reads
    ``<log dir>/<file_name>`` (or ``file_name`` itself if it is absolute), whose lines are
    ``name:value``, and sets the parameter to the value of the line named after it
    (``param.readable_name``, e.g. ``learning_rate``). A missing file changes nothing; a line it
    cannot read, or a file without the parameter's line, is reported as a warning.
    """

    def __init__(self, param, file_name: str = "hyper.txt"):
        super().__init__(param)
        if not os.path.isabs(file_name):
            logdir = get_logger_dir()
            if logdir is None:
                raise ValueError(
                    f"HumanHyperParamSetter reads '{file_name}' in the log directory, but none is "
                    "set: call logger.set_logger_dir() first, or give an absolute file_name"
                )
            file_name = os.path.join(logdir, file_name)
        self.file_name = file_name

    def _get_value_to_set(self):
        try:
            with open(self.file_name, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return None
        values = {}
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            key, sep, text = line.partition(":")
            try:
                if not sep:
                    raise ValueError("no ':'")
                values[key.strip()] = float(text)
            except ValueError:
                logger.warning(
                    "[HumanHyperParamSetter] %s line %d is not 'name:value': %r", self.file_name, number, line
                )
        name = self.param.readable_name
        if name not in values:
            logger.warning("[HumanHyperParamSetter] %s has no line for '%s'", self.file_name, name)
            return None
        return values[name]


class StatMonitorParamSetter(HyperParamSetter):
    """Change the parameter when a monitored scalar stops improving.

    At every trigger (by default, after every epoch; not before training) it takes the latest
    value of the scalar ``stat_name`` from the monitors into a window of the last ``last_k``
    values. Once the window is full, if none of its values is below the first by more than
    ``threshold`` (with ``reverse=True``: above it), the parameter is set to
    ``value_func(current value)`` and the window starts over. A trigger without a new value of
    the scalar is skipped with a warning.

    Example: divide the learning rate by 5 when the validation error has not dropped by 0.01 in
    the last 3 epochs: ``StatMonitorParamSetter('learning_rate', 'val-error', lambda x: x / 5,
    threshold=0.01, last_k=3)``.
    """

    def __init__(
        self, param, stat_name: str, value_func, threshold: float, last_k: int, reverse: bool = False
    ):
        super().__init__(param)
        if last_k < 1:
            raise ValueError(f"last_k must be at least 1, got {last_k}")
        self.stat_name = stat_name
        self.value_func = value_func
        self.threshold = threshold
        self.last_k = last_k
        self.reverse = reverse
        self._window: deque = deque(maxlen=last_k)
        self._last_step = None

    def _before_train(self) -> None:
        pass  # only reacts to scalars reported during training

    def _get_value_to_set(self):
        try:
            step, value = self.trainer.monitors.get_history(self.stat_name)[-1]
        except (KeyError, IndexError):
            logger.warning("[StatMonitorParamSetter] no value of '%s' was reported yet", self.stat_name)
            return None
        if step == self._last_step:
            logger.warning(
                "[StatMonitorParamSetter] no new value of '%s' since global step %s", self.stat_name, step
            )
            return None
        self._last_step = step
        self._window.append(value)
        if len(self._window) < self.last_k:
            return None
        first = self._window[0]
        if self.reverse:
            stalled = max(self._window) <= first + self.threshold
        else:
            stalled = min(self._window) >= first - self.threshold
        if not stalled:
            return None
        history = ", ".join(f"{v:.4g}" for v in self._window)
        logger.info("[StatMonitorParamSetter] '%s' has not improved: %s", self.stat_name, history)
        self._window.clear()
        return self.value_func(self.get_current_value())
