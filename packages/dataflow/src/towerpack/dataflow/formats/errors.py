"""DatasetFormatError: the one error for a dataset file that is damaged or not in its format.

Every reader of an on-disk format raises it (or a subclass) with a message that names the file
and what is wrong, so a truncated copy or a flipped byte never ends in a signal, a hang, or a
traceback from deep inside a decoder.
"""

from __future__ import annotations

__all__ = ["DatasetFormatError"]


class DatasetFormatError(ValueError):
    """A dataset file exists but its content is not what its format says (names the file)."""
