"""How variables get their values when a session starts: from a checkpoint, a dict, or nothing.

A ``SessionInit`` builds what it needs in the graph first (``_setup_graph``, before the graph
is finalized) and then initializes the session (``_run_init``).

Name matching follows the reference, so its checkpoints and ``.npz`` files load unchanged: a
global variable ``v`` takes the entry named ``v.name`` (``conv1/W:0``; entries saved without
``:0`` match too), after removing a leading ``prefix/`` if one is given. Graph variables without
an entry and entries without a variable are listed in one warning each (optimizer slots and
moving averages are left out of those lists).
"""

from __future__ import annotations

import glob
import os

import numpy as np

from . import logger
from .common import get_op_tensor_name
from .compat import tfv1
from .legacy.warn import warn_removed
from .varmanip import SessionUpdate, get_checkpoint_path, get_savename_from_varname, is_training_name

__all__ = [
    "ChainInit",
    "DictRestore",
    "JustCurrentSession",
    "SaverRestore",
    "SaverRestoreRelaxed",
    "SessionInit",
    "SmartInit",
    "TryResumeTraining",  # removed by the reference before 0.11, kept for older scripts
    "get_model_loader",
]


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


def _warn_unmatched(names, present: str, absent: str) -> None:
    names = [get_op_tensor_name(n)[0] for n in names]
    if names:
        logger.warning(
            "The following variables are in the %s, but not found in the %s: %s",
            present,
            absent,
            ", ".join(names),
        )


class _CheckpointEntries:
    """A checkpoint's entries under ``:0`` names (old checkpoints may hold them with ``:0``)."""

    def __init__(self, path: str):
        self.reader = tfv1.train.NewCheckpointReader(path)
        raw = self.reader.get_variable_to_shape_map()
        dtypes = self.reader.get_variable_to_dtype_map()
        self.real = {get_op_tensor_name(k)[1]: k for k in raw}
        self.shapes = {name: raw[k] for name, k in self.real.items()}
        self.dtypes = {name: dtypes[k] for name, k in self.real.items()}

    def __contains__(self, name: str) -> bool:
        return name in self.real

    def get(self, name: str) -> np.ndarray:
        return self.reader.get_tensor(self.real[name])


class SaverRestore(SessionInit):
    """Restore the global variables from a checkpoint (a prefix such as ``model-1000``, one of
    its files, a ``checkpoint`` pointer file or a directory).

    Args:
        model_path: the checkpoint.
        prefix: graph variables named ``prefix/x`` load the checkpoint's ``x``.
        ignore: names (with or without ``:0``) not to load, e.g. a learning rate.

    A variable whose shape or dtype differs from its entry is an error (ValueError naming them
    all); ``SaverRestoreRelaxed`` or ``SmartInit(path, ignore_mismatch=True)`` skip those instead.
    """

    def __init__(self, model_path: str, prefix: str | None = None, ignore=()):
        model_path = os.fspath(model_path)
        if model_path.endswith((".npy", ".npz")):
            logger.warning(
                "SaverRestore expects a TF checkpoint, but got a model path '%s'. To load from a dict, "
                "use 'DictRestore'.",
                model_path,
            )
        self.path = get_checkpoint_path(model_path)
        self.prefix = prefix
        self.ignore = [get_op_tensor_name(i)[1] for i in ignore]

    def _match_vars(self, entries: _CheckpointEntries) -> list[tuple[str, object]]:
        """``(entry name, variable)`` of the global variables found in the checkpoint; warns
        about the variables and entries that found no partner."""
        pairs, used, missing = [], set(), []
        for v in tfv1.global_variables():
            name = get_savename_from_varname(v.name, varname_prefix=self.prefix)
            if name in entries and name in self.ignore:
                logger.info("Variable %s in the graph will not be loaded from the checkpoint!", name)
                continue
            if name not in entries:
                if not is_training_name(v.name):
                    missing.append(v.name)
                continue
            if name in used:
                other = next(var for n, var in pairs if n == name)
                raise ValueError(f"Restore conflict: {v.name} and {other.name} both load {name}")
            used.add(name)
            pairs.append((name, v))
        _warn_unmatched(missing, "graph", "checkpoint")
        unused = sorted(n for n in set(entries.real) - used if not is_training_name(n))
        _warn_unmatched(unused, "checkpoint", "graph")
        return pairs

    def _setup_graph(self):
        entries = _CheckpointEntries(self.path)
        pairs = self._match_vars(entries)
        bad = []
        for name, v in pairs:
            shape, dtype = list(v.shape.as_list()), v.dtype.base_dtype
            saved_shape, saved_dtype = list(entries.shapes[name]), entries.dtypes[name]
            if shape != saved_shape or dtype != saved_dtype:
                bad.append(
                    f"{v.op.name}: graph {shape} {dtype.name}, checkpoint {saved_shape} {saved_dtype.name}"
                )
        if bad:
            raise ValueError(
                f"checkpoint {self.path} does not fit the graph: {'; '.join(bad)}. Use "
                "SmartInit(path, ignore_mismatch=True) (SaverRestoreRelaxed) to skip or convert them."
            )
        var_list = {entries.real[name]: v for name, v in pairs}
        self._saver = tfv1.train.Saver(var_list=var_list, name=f"restore_{id(self)}") if var_list else None

    def _run_init(self, sess):
        logger.info("Restoring checkpoint from %s ...", self.path)
        if self._saver is not None:
            self._saver.restore(sess, self.path)


class SaverRestoreRelaxed(SaverRestore):
    """``SaverRestore`` that adds no ops to the graph and forgives mismatches: a value with the
    same number of elements is reshaped, a float value cast to the variable's float type (and
    integers widened), each with a warning; a value of another size is skipped with a warning."""

    def _setup_graph(self):
        pass

    def _run_init(self, sess):
        logger.info("Restoring checkpoint from %s ...", self.path)
        entries = _CheckpointEntries(self.path)
        values = {}
        for name, v in self._match_vars(entries):
            value = SessionUpdate.relaxed_value_for_var(entries.get(name), v, ignore_mismatch=True)
            if value is not None:
                values[v.name] = (v, value)
        SessionUpdate(sess, [v for v, _ in values.values()]).update(
            {name: value for name, (_, value) in values.items()}
        )


class DictRestore(SessionInit):
    """Set the global variables from a ``{name: array}`` dict (names with or without ``:0``).

    Args:
        variable_dict: the values.
        ignore_mismatch: skip (with a warning) a value whose number of elements differs from its
            variable's, instead of raising ValueError. Values are reshaped and cast as
            ``SaverRestoreRelaxed`` does.
    """

    def __init__(self, variable_dict: dict, ignore_mismatch: bool = False):
        if not isinstance(variable_dict, dict):
            raise TypeError(f"DictRestore takes a dict, got {type(variable_dict).__name__}")
        self._prms = {get_op_tensor_name(k)[1]: v for k, v in variable_dict.items()}
        self._ignore_mismatch = ignore_mismatch

    def _run_init(self, sess):
        variables = tfv1.global_variables()
        names = [v.name for v in variables]
        matched = [n for n in names if n in self._prms]
        logger.info(
            "Variables to restore from dict: %s", ", ".join(get_op_tensor_name(n)[0] for n in matched)
        )
        _warn_unmatched(
            sorted(n for n in set(names) - set(self._prms) if not is_training_name(n)), "graph", "dict"
        )
        _warn_unmatched(sorted(set(self._prms) - set(names)), "dict", "graph")
        update = SessionUpdate(sess, [v for v in variables if v.name in self._prms], self._ignore_mismatch)
        logger.info("Restoring %d variables from dict ...", len(matched))
        skipped = update.update({n: self._prms[n] for n in matched})
        if skipped:
            logger.warning(
                "Skipped %d variable(s) whose size did not match: %s", len(skipped), ", ".join(skipped)
            )


class ChainInit(SessionInit):
    """Run several SessionInits in order (later ones win)."""

    def __init__(self, sess_inits):
        self.inits = [i for i in sess_inits if i is not None]
        for i in self.inits:
            if not isinstance(i, SessionInit):
                raise TypeError(f"ChainInit takes SessionInits, got {i!r}")

    def _setup_graph(self):
        for i in self.inits:
            i._setup_graph()

    def _run_init(self, sess):
        for i in self.inits:
            i._run_init(sess)


def _load_dict_file(path: str) -> dict:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"File {path} does not exist!")
    logger.info("Loading dictionary from %s ...", path)
    if path.endswith(".npz"):
        with np.load(path) as data:
            return {k: data[k] for k in data.files}
    # The reference's .npy format is a pickled dict: loading it runs pickle, so only load files you trust.
    obj = np.load(path, encoding="latin1", allow_pickle=True)
    if obj.dtype != object or obj.shape != ():
        raise ValueError(f"{path} holds an array of shape {obj.shape}, not a dict of variables (use .npz)")
    obj = obj.item()
    if not isinstance(obj, dict):
        raise ValueError(f"{path} holds a {type(obj).__name__}, not a dict of variables")
    return obj


def SmartInit(obj, ignore_mismatch: bool = False) -> SessionInit:
    """A SessionInit from whatever describes the initial values:

    - None, ``""`` or an empty dict/list: nothing (``JustCurrentSession``);
    - a SessionInit: itself; a list: ``ChainInit`` of each item;
    - a dict ``{name: array}``: ``DictRestore``;
    - a path ending in ``.npz``, or ``.npy`` (a pickled dict, as the reference wrote them): its
      dict, as ``DictRestore``;
    - a checkpoint (a prefix, one of its files, a ``checkpoint`` file or a directory):
      ``SaverRestore``, or ``SaverRestoreRelaxed`` with ``ignore_mismatch``.

    With ``ignore_mismatch``, values whose size does not fit their variable are skipped with a
    warning instead of raising ValueError.
    """
    if isinstance(obj, SessionInit):
        return obj
    if obj is None or (isinstance(obj, (str, dict, list, tuple)) and not obj):
        return JustCurrentSession()
    if isinstance(obj, (list, tuple)):
        return ChainInit([SmartInit(x, ignore_mismatch=ignore_mismatch) for x in obj])
    if isinstance(obj, (str, os.PathLike)):
        path = os.path.expanduser(os.fspath(obj))
        if path.endswith((".npy", ".npz")):
            obj = _load_dict_file(path)
        elif os.path.isdir(path) or glob.glob(glob.escape(path) + "*"):
            return (SaverRestoreRelaxed if ignore_mismatch else SaverRestore)(path)
        else:
            raise FileNotFoundError(f"Invalid argument to SmartInit: no checkpoint, .npz or .npy at {path}")
    if isinstance(obj, dict):
        return DictRestore(obj, ignore_mismatch=ignore_mismatch)
    raise TypeError(f"Invalid argument to SmartInit: {type(obj).__name__} ({obj!r})")


get_model_loader = SmartInit


def TryResumeTraining() -> SessionInit:
    """The reference's removed ``TryResumeTraining``: restore the log directory's latest
    checkpoint if it has one (a ``checkpoint`` file), else :class:`JustCurrentSession`."""
    warn_removed("tensorpack.tfutils.sessinit", "TryResumeTraining")
    directory = logger.get_logger_dir()
    pointer = os.path.join(directory, "checkpoint") if directory else ""
    if not os.path.isfile(pointer):
        return JustCurrentSession()
    logger.info("Found checkpoint at %s.", pointer)
    return SaverRestore(pointer)
