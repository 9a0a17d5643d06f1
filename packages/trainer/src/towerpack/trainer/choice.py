"""Choice: an enum of the values an argument may take, parsed from the strings the reference API takes."""

from __future__ import annotations

import enum
from typing import Self

__all__ = ["Choice"]


class Choice(enum.Enum):
    """Base of the trainer's mode enums: ``parse`` takes a member or its value (``"nccl"``)."""

    @classmethod
    def parse(cls, value: Self | str, what: str) -> Self:
        """The member for ``value``; a ValueError naming ``what`` and the allowed values otherwise."""
        if isinstance(value, cls):
            return value
        try:
            return cls(value)
        except ValueError:
            allowed = ", ".join(repr(m.value) for m in cls)
            raise ValueError(f"unknown {what} {value!r}; choose one of {allowed}") from None
