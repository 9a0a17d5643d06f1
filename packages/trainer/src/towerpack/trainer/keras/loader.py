"""tf-keras (Keras 2), loaded with a clear error when it is missing, and its learning phase.

Keras 3 (the ``keras`` package, and ``tf.keras`` unless TF_USE_LEGACY_KERAS is set) has no graph
mode, so models for the trainers are built with ``tf_keras``; importing it directly needs no
environment variable.
"""

from __future__ import annotations

import contextlib
import warnings

try:
    import tf_keras
except ImportError as e:  # pragma: no cover - tf-keras is installed by `make setup`
    raise ImportError(
        "towerpack.trainer.keras needs tf-keras (Keras 2), which is not installed. Next to "
        "tensorflow-cpu install it without its dependencies, `pip install --no-deps 'tf-keras==2.21.*'` "
        "(its requirement `tensorflow` would otherwise add the CUDA wheel); with the gpu extra, "
        "`pip install 'towerpack-trainer[gpu,keras]'`. See docs/keras.md."
    ) from e

__all__ = ["check_keras_model", "graph_learning_phase", "learning_phase", "tf_keras"]


@contextlib.contextmanager
def learning_phase(training: bool):
    """Inside, Keras layers called without ``training=`` build their training (or inference)
    branch, fixed in the graph, instead of reading Keras's learning-phase placeholder."""
    with contextlib.ExitStack() as stack:
        with warnings.catch_warnings():
            # Deprecated in favour of passing `training=`, which layers inside a model do not get.
            warnings.simplefilter("ignore", UserWarning)
            stack.enter_context(tf_keras.backend.learning_phase_scope(int(bool(training))))
        yield


def check_keras_model(model, where: str) -> None:
    """Raise a TypeError naming the problem unless ``model`` is a tf-keras Model."""
    if isinstance(model, tf_keras.Model):
        return
    module = type(model).__module__ or ""
    if module.split(".")[0] == "keras":
        raise TypeError(
            f"{where} returned a Keras 3 model ({type(model).__name__} from {module}). Keras 3 "
            "(`keras`, and `tf.keras` by default) has no graph mode: build the model with tf-keras, "
            "`import tf_keras as keras`."
        )
    raise TypeError(f"{where} must return a tf_keras.Model, got {type(model).__name__}")


def graph_learning_phase():
    """Keras's learning-phase placeholder of the default graph (made if missing), or None when the
    learning phase is fixed to a value."""
    phase = tf_keras.backend.learning_phase()
    return phase if hasattr(phase, "op") else None
