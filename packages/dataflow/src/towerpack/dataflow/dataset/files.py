"""Where the datasets live on disk and the errors for files that are missing or not in their format.

Nothing is ever downloaded: a reader whose files are missing raises :class:`DatasetNotFoundError`
naming every missing path and where to get it. The data directory follows the reference:
``$TENSORPACK_DATASET``, else ``~/tensorpack_data``, plus a per-dataset subdirectory
(:func:`towerpack.utils.fs.get_dataset_path`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from enum import Enum
from typing import Any

from towerpack.utils.fs import DATASET_VAR, get_dataset_path

from ..formats.errors import DatasetFormatError

__all__ = [
    "DATASET_VAR",
    "DatasetFormatError",
    "DatasetNotFoundError",
    "Split",
    "get_dataset_path",
    "load_mat",
    "require_files",
]


class DatasetNotFoundError(FileNotFoundError):
    """Files of a dataset are missing; the message names each one and says where to get them."""

    def __init__(self, dataset: str, missing: Iterable[str], how_to_get: str) -> None:
        self.dataset, self.missing, self.how_to_get = dataset, [os.fspath(m) for m in missing], how_to_get
        lines = "\n".join(f"  {m}" for m in self.missing)
        super().__init__(f"{dataset}: {len(self.missing)} file(s) missing:\n{lines}\n{how_to_get}")

    def __reduce__(self) -> tuple[type, tuple[str, list[str], str]]:
        return type(self), (self.dataset, self.missing, self.how_to_get)


class Split(Enum):
    """A named part of a dataset."""

    TRAIN = "train"
    VAL = "val"
    TEST = "test"
    EXTRA = "extra"

    @classmethod
    def parse(cls, value: Split | str, allowed: Iterable[Split], dataset: str) -> Split:
        allowed = tuple(allowed)
        try:
            split = value if isinstance(value, cls) else cls(str(value))
        except ValueError:
            split = None
        if split not in allowed:
            names = ", ".join(repr(s.value) for s in allowed)
            raise ValueError(f"{dataset}: the split must be one of {names}, got {value!r}")
        return split


def require_files(dataset: str, paths: Iterable[str | os.PathLike], how_to_get: str) -> None:
    """Raise :class:`DatasetNotFoundError` naming every path of ``paths`` that does not exist."""
    missing = [os.path.abspath(os.fspath(p)) for p in paths if not os.path.exists(p)]
    if missing:
        raise DatasetNotFoundError(dataset, missing, how_to_get)


def load_mat(path: str, dataset: str) -> dict[str, Any]:
    """The variables of the MATLAB file ``path`` (``scipy.io.loadmat``, imported only here)."""
    try:
        import scipy.io
    except ImportError:
        raise ImportError(f"{dataset} reads MATLAB .mat files with scipy: pip install scipy") from None
    try:
        return scipy.io.loadmat(path)
    except (ValueError, TypeError, OSError, NotImplementedError) as e:
        raise DatasetFormatError(f"{path}: not a readable MATLAB file ({type(e).__name__}: {e})") from None
