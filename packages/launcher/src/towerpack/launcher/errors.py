"""The one error type that ends `launch` with a single clear line and exit code 2."""

from __future__ import annotations

#: Exit code for bad input (malformed host list, unknown GPU, busy port, missing script, ...).
USAGE_EXIT = 2


class UsageError(Exception):
    """Bad input: `launch` prints ``launch: error: <message>`` and exits with code 2."""
