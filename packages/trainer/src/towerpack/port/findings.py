"""What ``towerpack port`` reports for a person to look at: one finding per place, ``file:line: message``."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Kind(enum.Enum):
    """Why a place needs a person."""

    NO_HOME = "no home"  # a reference name or module with nothing in towerpack
    TF_CONTRIB = "tf.contrib"  # gone with TensorFlow 1
    TF_REMOVED = "removed from TensorFlow"  # TF 1 API missing even from tf.compat.v1
    TF_LEGACY_KERAS = "needs tf-keras"  # tf.compat.v1.layers and friends: Keras 2 only
    TF_KERAS = "tf.keras is Keras 3"
    GPU_ONLY = "assumes a GPU"
    UNDEFINED = "undefined name"  # used, bound nowhere, not given by the file's star imports
    NUMPY_REMOVED = "removed from NumPy"  # no exact replacement, or one the port could not write
    STACK_REMOVED = "removed from a library"  # SciPy, Pillow, OpenCV 2, the standard library
    FLOAT_SHAPE = "float dimension"  # a shape or channel count computed with / or floats
    MISSING_DEPENDENCY = "not installed"  # a package the reference installed with itself


@dataclass(frozen=True)
class Finding:
    """One place that needs a person. ``line`` is 1-based, in the ported file."""

    path: str
    line: int
    kind: Kind
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"
