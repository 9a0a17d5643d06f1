"""Variables and checkpoint files: load values into a session's variables, dump them to an
``.npz`` or a checkpoint, read checkpoints into dicts, and find checkpoint files.

Names follow the reference: in dicts, a variable is keyed by its tensor name (``conv1/W:0``) or
its op name (``conv1/W``); both are accepted everywhere.
"""

from __future__ import annotations

import glob
import os
import re

import numpy as np

from . import logger
from .common import get_op_tensor_name
from .compat import tf, tfv1
from .legacy.warn import removed

__all__ = [
    "SessionUpdate",
    "dump_chkpt_vars",  # removed by the reference before 0.11, kept for older scripts
    "dump_session_params",
    "get_all_checkpoints",
    "get_checkpoint_path",
    "get_savename_from_varname",
    "is_training_name",
    "load_checkpoint_vars",
    "load_chkpt_vars",
    "save_checkpoint_vars",
    "save_chkpt_vars",
]


def get_savename_from_varname(
    varname: str, varname_prefix: str | None = None, savename_prefix: str | None = None
):
    """The name a graph variable has in a checkpoint: ``varname`` without a leading
    ``varname_prefix/``, with ``savename_prefix/`` put in front."""
    name = varname
    if varname_prefix and name.startswith(varname_prefix + "/"):
        name = name[len(varname_prefix) + 1 :]
    if savename_prefix:
        name = f"{savename_prefix}/{name}"
    return name


def _allow_cast(to_dtype, from_dtype) -> bool:
    """Float to any float; an integer to an integer type that holds all its values."""
    to_dtype, from_dtype = tf.as_dtype(to_dtype), tf.as_dtype(from_dtype)
    if to_dtype.is_floating and from_dtype.is_floating:
        return True
    if to_dtype.is_integer and from_dtype.is_integer:
        return to_dtype.min <= from_dtype.min and to_dtype.max >= from_dtype.max
    return False


class SessionUpdate:
    """Set variables of a session from numpy values, in one ``run``, without adding ops to the
    graph (each variable's initializer runs with the value fed as its initial value).

    Args:
        sess: the session.
        vars_to_update: the variables that may be updated (keyed by ``var.name``, with ``:0``).
        ignore_mismatch: a value with another number of elements than its variable is skipped
            with a warning instead of raising ValueError.
    """

    def __init__(self, sess, vars_to_update, ignore_mismatch: bool = False):
        self.sess = sess
        self.name_map = {v.name: v for v in vars_to_update}
        self.ignore_mismatch = ignore_mismatch

    @staticmethod
    def relaxed_value_for_var(value, var, ignore_mismatch: bool = False):
        """``value`` made loadable into ``var``: reshaped (with a warning) when only the shape
        differs but not the number of elements, cast (with a warning) from another float type or
        a narrower integer type. Returns None when the sizes differ and ``ignore_mismatch``.

        Raises:
            ValueError: the sizes differ (and not ``ignore_mismatch``), or the dtype cannot be
                cast safely.
        """
        name = var.op.name
        value = np.asarray(value)
        var_shape = tuple(var.shape.as_list())
        if var_shape != value.shape:
            if None in var_shape or np.prod(var_shape) != np.prod(value.shape):
                msg = (
                    f"Cannot load an array of shape {value.shape} into variable '{name}' "
                    f"whose shape is {var_shape}."
                )
                if ignore_mismatch:
                    logger.warning(msg)
                    return None
                raise ValueError(msg)
            logger.warning(
                "The tensor is reshaped from %s to %s when assigned to '%s'", value.shape, var_shape, name
            )
            value = value.reshape(var_shape)
        var_dtype = var.dtype.base_dtype
        if var_dtype.as_numpy_dtype != value.dtype:
            msg = f"Variable {name} has dtype {var_dtype.name} but was given a value of dtype {value.dtype}."
            if not _allow_cast(var_dtype, value.dtype):
                raise ValueError(msg + " The dtypes cannot be converted without loss.")
            logger.warning(msg + " The value will be loaded after casting!")
            value = value.astype(var_dtype.as_numpy_dtype)
        return value

    def update(self, prms: dict) -> list[str]:
        """Load ``{variable name: value}`` (every name among ``vars_to_update``); returns the
        names skipped because of a size mismatch (with ``ignore_mismatch``)."""
        unknown = sorted(set(prms) - set(self.name_map))
        if unknown:
            raise KeyError(f"SessionUpdate: not among the variables to update: {unknown}")
        fetches, feeds, skipped = [], {}, []
        for name, value in prms.items():
            var = self.name_map[name]
            value = self.relaxed_value_for_var(value, var, ignore_mismatch=self.ignore_mismatch)
            if value is None:
                skipped.append(name)
                continue
            fetches.append(var.initializer)
            feeds[var.initializer.inputs[1]] = value
        if fetches:
            self.sess.run(fetches, feed_dict=feeds)
        return skipped


def dump_session_params(path: str) -> None:
    """Save the values of the model's variables (global ones that are TRAINABLE or MODEL
    variables) in the default session to ``path``: an ``.npz`` (loadable by ``SmartInit``) or a
    checkpoint (see ``save_chkpt_vars``)."""
    sess = tfv1.get_default_session()
    if sess is None:
        raise RuntimeError("dump_session_params() needs a default session (`with sess.as_default():`)")
    variables = tfv1.get_collection(tfv1.GraphKeys.TRAINABLE_VARIABLES) + tfv1.get_collection(
        tfv1.GraphKeys.MODEL_VARIABLES
    )
    names = [v.name for v in variables]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f"variables in both TRAINABLE_VARIABLES and MODEL_VARIABLES: {duplicated}")
    global_names = {v.name for v in tfv1.global_variables()}
    variables = [v for v in variables if v.name in global_names]
    values = sess.run(variables)
    save_chkpt_vars({v.name: value for v, value in zip(variables, values, strict=True)}, path)


def save_chkpt_vars(dic: dict, path: str) -> None:
    """Save ``{name: value}`` to ``path``: ``.npz`` (compressed, keys as given) or a TF
    checkpoint with one variable per entry (named without ``:0``; the directory's ``checkpoint``
    pointer file is left alone)."""
    path = os.fspath(path)
    logger.info("Variables to save to %s: %s", path, ", ".join(sorted(dic)))
    if path.endswith(".npy"):
        raise ValueError(f"save_chkpt_vars writes .npz or checkpoints, not .npy: {path}")
    if path.endswith(".npz"):
        np.savez_compressed(path, **dic)
        return
    names = [get_op_tensor_name(k)[0] for k in dic]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f"save_chkpt_vars: names given both with and without ':0': {duplicated}")
    with tf.Graph().as_default():
        feeds, var_list = {}, {}
        for name, value in zip(names, dic.values(), strict=True):
            value = np.asarray(value)
            # Fed, not embedded: a constant per value would hit the 2 GB graph limit.
            init = tfv1.placeholder(tf.as_dtype(value.dtype), value.shape)
            var_list[name] = tfv1.Variable(init, trainable=False, name="v")
            feeds[init] = value
        saver = tfv1.train.Saver(var_list=var_list, allow_empty=True)
        with tfv1.Session() as sess:
            sess.run(tfv1.global_variables_initializer(), feed_dict=feeds)
            saver.save(sess, path, write_meta_graph=False, write_state=False)


def load_chkpt_vars(path: str) -> dict:
    """Every variable of a checkpoint (or an ``.npz``) as ``{op name: value}``."""
    path = os.fspath(path)
    if path.endswith(".npz"):
        with np.load(path) as data:
            return {get_op_tensor_name(k)[0]: data[k] for k in data.files}
    reader = tfv1.train.NewCheckpointReader(get_checkpoint_path(path))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


save_checkpoint_vars = save_chkpt_vars
load_checkpoint_vars = load_chkpt_vars


@removed("tensorpack.tfutils.varmanip")
def dump_chkpt_vars(model_path: str) -> dict:
    """The reference's removed name of :func:`load_chkpt_vars`."""
    return load_chkpt_vars(model_path)


def get_checkpoint_path(path: str) -> str:
    """The prefix of a checkpoint (what TensorFlow's readers take) from what a user gives: a
    prefix (``model-1000``), one of its files (``.index``, ``.data-00000-of-00001``, ``.meta``),
    a ``checkpoint`` pointer file or a directory (both meaning its latest checkpoint). A bare
    file name is taken relative to ``.``.

    Raises:
        FileNotFoundError: no such checkpoint.
    """
    path = os.fspath(path)
    if os.path.basename(path) == path:
        path = os.path.join(".", path)
    if os.path.isdir(path) or os.path.basename(path) == "checkpoint":
        directory = path if os.path.isdir(path) else os.path.dirname(path)
        latest = tfv1.train.latest_checkpoint(directory)
        if latest is None:
            raise FileNotFoundError(f"no checkpoint in {directory} (no 'checkpoint' file naming one)")
        return latest
    fixed = re.sub(r"(\.data-\d+-of-\d+|\.index|\.meta)$", "", path)
    if fixed != path:
        logger.info("Checkpoint path %s is auto-corrected to %s.", path, fixed)
        path = fixed
    if not os.path.isfile(path + ".index") and not os.path.isfile(path):
        raise FileNotFoundError(f"checkpoint {path} not found (no {path}.index)")
    return path


def get_all_checkpoints(dir: str = ".", prefix: str = "model") -> list[tuple[str, int]]:
    """``[(path, step)]`` of the checkpoints ``<dir>/<prefix>-<step>``, by step. As in the
    reference, each path is the checkpoint's ``.index`` file (every loader here accepts it)."""
    pattern = re.compile(re.escape(prefix) + r"-(\d+)\.index$")
    found = []
    for path in glob.glob(os.path.join(glob.escape(os.fspath(dir)), f"{glob.escape(prefix)}-*.index")):
        m = pattern.search(os.path.basename(path))
        if m:
            found.append((path, int(m.group(1))))
    return sorted(found, key=lambda item: item[1])


_TRAINING_SUFFIXES = re.compile(
    r"/(Adam|Adam_1|Momentum|Adadelta|Adadelta_1|RMSProp|RMSProp_1|Adagrad|AccumGrad)$"
)


def is_training_name(name: str) -> bool:
    """Whether a variable is probably used only in training (optimizer slots, moving-average
    summaries, gradient accumulation): such variables missing from a checkpoint are not warned
    about."""
    name = get_op_tensor_name(name)[0]
    return bool(
        _TRAINING_SUFFIXES.search(name)
        or name.startswith(("EMA/", "AccumGrad", "apply_gradients"))
        or "/EMA/" in name
    )
