"""Places365Standard: the low-resolution Places365-Standard images in their "easy directory structure".

Datapoints are ``[BGR uint8 (256, 256, 3), int]``; the class of ``train/<class>/<file>`` is its
second path component, and labels follow the sorted class names. Unlike the reference, the module
has an ``__all__`` (the reference leaked its imports into ``dataset``'s namespace).
"""

from __future__ import annotations

import os
from typing import Any

from .base import LabelledImageFiles
from .files import DatasetFormatError, Split, require_files

__all__ = ["Places365Standard"]

PLACES_URL = "http://places2.csail.mit.edu/download.html"


class Places365Standard(LabelledImageFiles):
    """Places365-Standard; see the module docstring.

    Args:
        dir: the extracted ``places365_standard/`` holding ``train.txt``, ``val.txt``, ``train/``, ``val/``.
        name: ``"train"`` or ``"val"``.
        shuffle: shuffle every epoch; default: for the training split.
        shard, seed, remainder, rank, world_size: see :class:`IndexedDataset`.
    """

    def __init__(
        self,
        dir: str,
        name: str,
        shuffle: bool | None = None,
        **order: Any,
    ) -> None:
        split = Split.parse(name, (Split.TRAIN, Split.VAL), "Places365Standard")
        self.name = split.value
        self.dir = os.path.expanduser(dir)
        label_file = os.path.join(self.dir, f"{split.value}.txt")
        require_files(
            "Places365Standard",
            [label_file],
            f"Download the small images (256x256) of Places365-Standard in the easy directory structure "
            f"from {PLACES_URL} and pass the extracted places365_standard directory as dir.",
        )
        entries = []
        with open(label_file) as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                rel = line.split()[0]
                parts = rel.split("/")
                if len(parts) < 3:
                    raise DatasetFormatError(
                        f"{label_file}:{lineno}: expected '<split>/<class>/<file>', got {rel!r}"
                    )
                entries.append((os.path.join(self.dir, rel), parts[1]))
        self.class_names = sorted({c for _, c in entries})
        ids = {c: i for i, c in enumerate(self.class_names)}
        self.imglist = [(path, ids[c]) for path, c in entries]
        self._init_split_order(split, shuffle, **order)
