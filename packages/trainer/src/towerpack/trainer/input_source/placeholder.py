"""PlaceholderInput: plain placeholders, for predictors and hand-written feeding."""

from __future__ import annotations

from .base import InputSource
from .utils import placeholders_for

__all__ = ["PlaceholderInput"]


class PlaceholderInput(InputSource):
    """One placeholder per input; every call of ``get_input_tensors`` returns the same ones."""

    def _setup(self, input_signature) -> None:
        self._placeholders = placeholders_for(input_signature)

    def _get_input_tensors(self) -> list:
        return list(self._placeholders)
