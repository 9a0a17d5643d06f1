"""How variables get their values when a session starts: from a checkpoint, a dict, or nothing.

A ``SessionInit`` builds what it needs in the graph first (``_setup_graph``, before the graph
is finalized) and then initializes the session (``_run_init``).
"""

from __future__ import annotations

import os

import numpy as np

from . import logger
from .compat import tfv1

__all__ = ["ChainInit", "DictRestore", "JustCurrentSession", "SaverRestore", "SessionInit", "SmartInit"]


class SessionInit:
    """Base class: ``init(sess)`` = ``_setup_graph()`` then ``_run_init(sess)``."""

    def init(self, sess) -> None:
        self._setup_graph()
        self._run_init(sess)

    def _setup_graph(self) -> None:
        pass

    def _run_init(self, sess) -> None:
        pass


class JustCurrentSession(SessionInit):
    """Keep what the session creator did (variables run their initializers)."""


def _resolve_checkpoint(path: str) -> str:
    path = os.fspath(path)
    if os.path.isdir(path):
        latest = tfv1.train.latest_checkpoint(path)
        if latest is None:
            raise FileNotFoundError(f"no checkpoint in directory {path}")
        return latest
    if os.path.basename(path) == "checkpoint":
        return _resolve_checkpoint(os.path.dirname(path) or ".")
    for suffix in (".index", ".meta"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
    if ".data-" in os.path.basename(path):
        path = path[: path.rindex(".data-")]
    if not os.path.isfile(path + ".index"):
        raise FileNotFoundError(f"checkpoint {path} not found (no {path}.index)")
    return path


def _var_name(v) -> str:
    return v.op.name


class SaverRestore(SessionInit):
    """Restore variables from a checkpoint (a directory, a prefix, or one of its files).

    Variables are matched by name; ``prefix`` is prepended to graph names when looking them up
    in the checkpoint. Graph variables missing from the checkpoint keep their initial values
    (with a warning); a shape mismatch is an error. Names in ``ignore`` are skipped.
    """

    def __init__(self, model_path: str, prefix: str | None = None, ignore=()):
        self.path = _resolve_checkpoint(model_path)
        self.prefix = prefix
        self.ignore = {i[:-2] if i.endswith(":0") else i for i in ignore}

    def _setup_graph(self):
        reader = tfv1.train.NewCheckpointReader(self.path)
        shapes = reader.get_variable_to_shape_map()
        var_list, missing, mismatch = {}, [], []
        for v in tfv1.global_variables() + tfv1.local_variables():
            name = _var_name(v)
            if name in self.ignore:
                continue
            key = f"{self.prefix}/{name}" if self.prefix else name
            if key not in shapes:
                missing.append(name)
                continue
            if v.shape.is_fully_defined() and list(v.shape) != list(shapes[key]):
                mismatch.append(f"{name}: graph {list(v.shape)} vs checkpoint {shapes[key]}")
                continue
            var_list[key] = v
        if mismatch:
            raise ValueError(f"checkpoint {self.path} does not fit the graph: " + "; ".join(mismatch))
        if missing:
            logger.warning(
                "Variables not in checkpoint %s (left initialized): %s", self.path, ", ".join(missing)
            )
        unused = sorted(set(shapes) - set(var_list))
        if unused:
            logger.info("Checkpoint entries not used: %s", ", ".join(unused))
        self._saver = tfv1.train.Saver(var_list=var_list, allow_empty=True) if var_list else None

    def _run_init(self, sess):
        if self._saver is not None:
            logger.info("Restoring checkpoint %s", self.path)
            self._saver.restore(sess, self.path)


class DictRestore(SessionInit):
    """Set variables from a ``{name: numpy array}`` dict (names with or without ``:0``)."""

    def __init__(self, variable_dict: dict):
        if not isinstance(variable_dict, dict):
            raise TypeError(f"DictRestore takes a dict, got {type(variable_dict).__name__}")
        self._values = {k[:-2] if k.endswith(":0") else k: v for k, v in variable_dict.items()}

    def _run_init(self, sess):
        variables = {_var_name(v): v for v in tfv1.global_variables() + tfv1.local_variables()}
        missing = sorted(set(variables) - set(self._values))
        if missing:
            logger.warning("Variables not in the dict (left initialized): %s", ", ".join(missing))
        unknown = sorted(set(self._values) - set(variables))
        if unknown:
            logger.info("Dict entries without a variable: %s", ", ".join(unknown))
        for name in sorted(set(variables) & set(self._values)):
            var, value = variables[name], np.asarray(self._values[name])
            if var.shape.is_fully_defined() and tuple(var.shape) != value.shape:
                raise ValueError(
                    f"variable {name} has shape {tuple(var.shape)}, the dict gives {value.shape}"
                )
            var.load(value, sess)
        logger.info("Restored %d variables from a dict", len(set(variables) & set(self._values)))


class ChainInit(SessionInit):
    """Run several SessionInits in order (later ones win)."""

    def __init__(self, inits):
        self.inits = [i for i in inits if i is not None]
        for i in self.inits:
            if not isinstance(i, SessionInit):
                raise TypeError(f"ChainInit takes SessionInits, got {i!r}")

    def _setup_graph(self):
        for i in self.inits:
            i._setup_graph()

    def _run_init(self, sess):
        for i in self.inits:
            i._run_init(sess)


def SmartInit(obj) -> SessionInit:
    """A SessionInit from whatever describes the initial values.

    ``None`` → nothing; a SessionInit → itself; a dict → DictRestore; a ``.npz`` file →
    DictRestore of its arrays; a checkpoint directory or path → SaverRestore; a list → ChainInit.
    """
    if obj is None:
        return JustCurrentSession()
    if isinstance(obj, SessionInit):
        return obj
    if isinstance(obj, dict):
        return DictRestore(obj)
    if isinstance(obj, (list, tuple)):
        return ChainInit([SmartInit(o) for o in obj])
    if isinstance(obj, (str, os.PathLike)):
        path = os.fspath(obj)
        if path.endswith(".npz"):
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{path} not found")
            with np.load(path, allow_pickle=False) as data:
                return DictRestore({k: data[k] for k in data.files})
        return SaverRestore(path)
    raise TypeError(f"SmartInit does not know how to initialize from {type(obj).__name__}")
