"""What TensorFlow 2.21 no longer has of the TensorFlow 1 API, and what to use instead, as data.

Paths are relative to the TensorFlow API (``contrib.slim`` for ``tf.contrib.slim``). The report picks
the entry with the longest matching prefix: a tf.contrib name's own entry in contrib_table.py (its exact
home, which towerpack port writes where it can, or its nearest replacement), else its module's
advice below. These hold without importing TensorFlow; everything else is checked against the
installed TensorFlow (api.py).
"""

from __future__ import annotations

from .contrib_table import CONTRIB_EXTRA, Nearest, Rewrite, lookup

_NO_CONTRIB = "tf.contrib is gone from TensorFlow 2 (there is no tf.compat.v1.contrib)"
_LEGACY_KERAS = (
    "needs Keras 2 in TensorFlow 2.21, and tf-keras is not installed here: install it "
    "(pip install --no-deps 'tf-keras==2.21.*'); towerpack.trainer then turns on TF_USE_LEGACY_KERAS"
)

# tf.contrib.<path>: a maintained replacement where one exists.
CONTRIB: dict[str, str] = {
    "contrib": "no maintained replacement is known for this module",
    "contrib.slim": f"use tf_slim ({CONTRIB_EXTRA}; import tf_slim as slim), which has it unchanged",
    "contrib.slim.nets": f"use tf_slim.nets ({CONTRIB_EXTRA})",
    "contrib.layers": f"tf_slim ({CONTRIB_EXTRA}) has its layers, initializers and regularizers "
    "unchanged, not its feature columns and embeddings; towerpack's layers (towerpack.trainer.models: "
    "Conv2D, FullyConnected, BatchNorm, ...) replace the common ones",
    "contrib.framework": f"arg_scope and the variable helpers are in tf_slim ({CONTRIB_EXTRA}); towerpack "
    "has argscope (towerpack.trainer.models); nest is tf.nest",
    "contrib.rnn": "the core cells (LSTMCell, GRUCell, MultiRNNCell, DropoutWrapper, ...) are in "
    "tf.compat.v1.nn.rnn_cell (towerpack port writes them there), which needs tf-keras (Keras 2: pip "
    "install --no-deps 'tf-keras==2.21.*'; towerpack.trainer then turns on TF_USE_LEGACY_KERAS); the "
    "other contrib cells have no maintained replacement",
    "contrib.eager": "eager execution is part of TensorFlow 2 itself (tfe.defun is tf.function), but "
    "towerpack trains in graph mode",
    "contrib.memory_stats": "towerpack.trainer.callbacks.GPUMemoryTracker reports peak GPU memory "
    "(tf.config.experimental.get_memory_info reads it)",
    "contrib.nccl": "towerpack's multi-GPU trainers and towerpack.trainer.graph_builder.allreduce_grads "
    "do the all-reduce",
    "contrib.distributions": f"use TensorFlow Probability's tfp.distributions ({CONTRIB_EXTRA})",
    "contrib.data": "use tf.data and tf.data.experimental",
    "contrib.summary": "use tf.compat.v1.summary",
    "contrib.tpu": "use tf.compat.v1.tpu",
    "contrib.metrics": f"tf_slim.metrics ({CONTRIB_EXTRA}) has them unchanged; tf.compat.v1.metrics "
    "has other names and arguments",
    "contrib.losses": f"tf_slim.losses ({CONTRIB_EXTRA}) has them unchanged; tf.compat.v1.losses takes "
    "labels and logits in the other order",
    "contrib.lookup": "use tf.compat.v1.lookup",
    "contrib.util": "use tf.compat.v1.make_ndarray and tf.compat.v1.make_tensor_proto",
    "contrib.staging": "towerpack.trainer.input_source.StagingInput stages inputs on the device",
    "contrib.predictor": "use towerpack.trainer.predict (OfflinePredictor)",
    "contrib.learn": "tf.estimator and tf.contrib.learn were removed in TensorFlow 2.16: train with "
    "towerpack's trainers",
    "contrib.estimator": "tf.estimator was removed in TensorFlow 2.16: train with towerpack's trainers",
    "contrib.image": "no maintained replacement: tf.image and tf.raw_ops.ImageProjectiveTransformV3 "
    "cover resizing and projective transforms",
    "contrib.seq2seq": "no maintained replacement (TensorFlow Addons, which took it over, has ended)",
    "contrib.crf": "no maintained replacement (TensorFlow Addons, which took it over, has ended)",
}

# Other TF 1 API paths with a fixed answer (the same in tf and tf.compat.v1).
GONE: dict[str, str] = {
    "estimator": "tf.estimator was removed in TensorFlow 2.16, also from tf.compat.v1: train with "
    "towerpack's trainers",
    "keras": "tf.keras is Keras 3 in TensorFlow 2.21, which has no graph mode: install tf-keras "
    "(pip install --no-deps 'tf-keras==2.21.*'; towerpack.trainer then makes tf.keras Keras 2)",
}

# tf.compat.v1 paths that only exist with tf-keras (Keras 2) in TensorFlow 2.21.
LEGACY_KERAS = ("layers", "nn.rnn_cell")
LEGACY_KERAS_ADVICE = _LEGACY_KERAS
LAYERS_ADVICE = "or use towerpack's layers (towerpack.trainer.models: Conv2D, FullyConnected, ...)"


def _longest(table: dict[str, str], path: str) -> str | None:
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        found = table.get(".".join(parts[:end]))
        if found is not None:
            return found
    return None


def contrib_advice(path: str) -> str | None:
    """For a ``contrib...`` path: why it is gone and what to use instead."""
    if path != "contrib" and not path.startswith("contrib."):
        return None
    found = lookup(path)
    if found is not None and isinstance(found.entry, Nearest):
        return f"{_NO_CONTRIB}; {found.entry.advice}"
    rewrite = found.rewrite if found is not None else None
    if found is None or rewrite is None:
        return f"{_NO_CONTRIB}; {_longest(CONTRIB, path)}"
    target = found.target()
    where = f"its exact home is {target.shown}"
    if target.module.split(".")[0] != "tensorflow":
        where += f" ({CONTRIB_EXTRA})"
    return f"{_NO_CONTRIB}; {where}{_left_because(rewrite)}"


def _left_because(rewrite: Rewrite) -> str:
    """Why ``towerpack port`` may have left a name with an exact home."""
    if rewrite.max_positional is not None:
        return (
            f", which towerpack port writes for calls that pass at most {rewrite.max_positional} "
            "argument(s) by position (a new parameter follows)"
            + (f" and none of {', '.join(rewrite.unsupported)}" if rewrite.unsupported else "")
        )
    if rewrite.unsupported:
        return f", which towerpack port writes for calls without {', '.join(rewrite.unsupported)}"
    if rewrite.renamed:
        renamed = ", ".join(f"{old} -> {new}" for old, new in rewrite.renamed)
        return f", which towerpack port writes for direct calls (it renames {renamed})"
    return ""


def gone_advice(path: str) -> str | None:
    return _longest(GONE, path)


def needs_legacy_keras(path: str) -> bool:
    return any(path == p or path.startswith(p + ".") for p in LEGACY_KERAS)
