"""Callbacks that run graph ops or fetch graph tensors: before training, on trigger, or with every step.

RunOp / RunUpdateOps / CheckNumerics run ops; ProcessTensors / DumpTensors fetch tensors with
every training step; DumpTensorAsImage evaluates a tensor at every trigger and saves it as PNGs.
"""

from __future__ import annotations

import os

import numpy as np

from .. import logger
from ..callback import Callback
from ..common import get_op_tensor_name
from ..compat import tf, tfv1

__all__ = [
    "CheckNumerics",
    "DumpParamAsImage",
    "DumpTensor",
    "DumpTensorAsImage",
    "DumpTensors",
    "ProcessTensors",
    "RunOp",
    "RunUpdateOps",
]


class RunOp(Callback):
    """Runs an op before training, at every trigger, and/or with every step.

    Args:
        op: an op or tensor, or a function that builds one (called while the graph is set up).
        run_before: run once before training starts.
        run_as_trigger: run at every trigger (by default the end of every epoch).
        run_step: run together with every training step (in the same session run).
    """

    _chief_only = False

    def __init__(
        self,
        op,
        run_before: bool = True,
        run_as_trigger: bool = True,
        run_step: bool = False,
        verbose: bool = False,
    ):
        self.setup_func = (
            op if callable(op) and not isinstance(op, (tf.Operation, tf.Tensor)) else (lambda: op)
        )
        self.run_before = run_before
        self.run_as_trigger = run_as_trigger
        self.run_step = run_step
        self.verbose = verbose

    def _setup_graph(self):
        self._op = self.setup_func()
        self._args = tfv1.train.SessionRunArgs(fetches=self._op) if self.run_step else None

    def _run(self):
        if self.verbose:
            logger.info("Running op %s ...", self._op.name)
        self.trainer.sess.run(self._op)

    def _before_train(self):
        if self.run_before:
            self._run()

    def _trigger(self):
        if self.run_as_trigger:
            self._run()

    def _takes_part_in_runs(self) -> bool:
        return self._args is not None

    def before_run(self, ctx):
        return self._args

    def __str__(self):
        op = getattr(self, "_op", None)
        return f"RunOp({op.name})" if op is not None else "RunOp"


class RunUpdateOps(RunOp):
    """Runs the ops in a collection (UPDATE_OPS: batch-norm statistics and the like) with every step."""

    def __init__(self, collection: str = tfv1.GraphKeys.UPDATE_OPS):
        self._collection = collection

        def make():
            ops = tfv1.get_collection(collection)
            return tf.group(*ops, name="update_ops") if ops else None

        super().__init__(make, run_before=False, run_as_trigger=False, run_step=True)

    def _setup_graph(self):
        self._op = self.setup_func()
        self._args = tfv1.train.SessionRunArgs(fetches=self._op) if self._op is not None else None


class CheckNumerics(RunOp):
    """Check every trainable variable for NaN and Inf: before training, at every trigger
    (``run_as_trigger``) and/or with every step (``run_step``). A bad value raises
    ``tf.errors.InvalidArgumentError`` naming the variable (``CheckNumerics['<var>']``).
    """

    _chief_only = True

    def __init__(self, run_as_trigger: bool = True, run_step: bool = False):
        def make():
            checks = [
                tf.debugging.check_numerics(v, f"CheckNumerics['{v.op.name}']").op
                for v in tfv1.trainable_variables()
            ]
            return tf.group(*checks, name="CheckAllNumerics")

        super().__init__(make, run_before=True, run_as_trigger=run_as_trigger, run_step=run_step)


def _tensor_names(names, who: str) -> list[str]:
    if not isinstance(names, (list, tuple)):
        raise TypeError(f"{who} takes a list of tensor names, got {names!r}")
    return list(names)


class ProcessTensors(Callback):
    """Fetch tensors with every training step and call ``fn(*values)``.

    ``names`` is a list of tensor names, looked up in the graph and then in the first training
    tower. Example: ``ProcessTensors(['cost', 'accuracy'], lambda c, a: print(c, a))``.
    """

    def __init__(self, names, fn):
        self._names = _tensor_names(names, type(self).__name__)
        self._fn = fn

    def _setup_graph(self) -> None:
        self._args = tfv1.train.SessionRunArgs(fetches=self.get_tensors_maybe_in_tower(self._names))

    def before_run(self, ctx):
        return self._args

    def _after_run(self, run_context, run_values) -> None:
        self._fn(*run_values.results)


class DumpTensors(ProcessTensors):
    """Save tensors with every training step to ``<log dir>/DumpTensor-<global step>.npz``.

    The file maps each name as given to its value: ``dict(np.load(path))``. The log directory
    is the one set when the callback is made.
    """

    def __init__(self, names):
        names = _tensor_names(names, type(self).__name__)
        self._dir = logger.require_logger_dir(type(self).__name__)

        def save(*values):
            path = os.path.join(self._dir, f"DumpTensor-{self.global_step}.npz")
            np.savez(path, **dict(zip(names, values, strict=True)))

        super().__init__(names, save)


class DumpTensorAsImage(Callback):
    """At every trigger (by default, after every epoch) evaluate a tensor and save it as PNG(s)
    in the log directory.

    The tensor is evaluated alone (``sess.run``), so it should not depend on the input (weights
    and other variables are the usual subject). ``map_func`` turns its value into an image
    ``[h, w]`` / ``[h, w, c]`` or a list (or 4-D array) of them; each image is multiplied by
    ``scale``, clipped to 0..255 and written as ``<prefix>-ep<epoch:03d>.png`` (the first image of
    a list) or ``<prefix>-ep<epoch:03d>-<i>.png`` (the others). ``prefix`` defaults to the op
    name. Three- and four-channel images are BGR(A), as the reference (which wrote them with
    OpenCV) has them. The unscaled value also goes to the monitors as an image.
    """

    def __init__(self, tensor_name: str, prefix: str | None = None, map_func=None, scale=255):
        op_name, self.tensor_name = get_op_tensor_name(tensor_name)
        self.prefix = op_name if prefix is None else prefix
        self.func = map_func
        self.scale = scale
        self.log_dir = logger.require_logger_dir(type(self).__name__)

    def _setup_graph(self) -> None:
        self._tensor = self.graph.get_tensor_by_name(self.tensor_name)

    def _trigger(self) -> None:
        value = self.trainer.sess.run(self._tensor)
        if self.func is not None:
            value = self.func(value)
        if isinstance(value, list) or np.ndim(value) == 4:
            for i, image in enumerate(value):
                self._save(image, i)
        else:
            self._save(value, 0)
        self.trainer.monitors.put_image(self.prefix, value)

    def _save(self, image, index: int) -> None:
        from PIL import Image  # pillow: only this callback needs it

        image = np.asarray(image)
        if image.ndim == 3 and image.shape[2] == 1:
            image = image[:, :, 0]
        if image.ndim == 3 and image.shape[2] in (3, 4):
            image = np.concatenate([image[:, :, 2::-1], image[:, :, 3:]], axis=2)  # BGR(A) -> RGB(A)
        elif image.ndim != 2:
            raise ValueError(
                f"DumpTensorAsImage: an image must be [h, w] or [h, w, c] with c in (1, 3, 4), "
                f"got shape {list(np.shape(image))}"
            )
        pixels = np.clip(image * self.scale, 0, 255).astype(np.uint8)
        suffix = f"-{index}" if index else ""
        Image.fromarray(pixels).save(
            os.path.join(self.log_dir, f"{self.prefix}-ep{self.epoch_num:03d}{suffix}.png")
        )


DumpTensor = DumpTensors
DumpParamAsImage = DumpTensorAsImage
