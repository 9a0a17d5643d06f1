"""The error a command-line tool reports as one line, without a traceback."""

from __future__ import annotations

__all__ = ["CLIError"]


class CLIError(Exception):
    """A usage problem reported as one line, without a traceback."""
