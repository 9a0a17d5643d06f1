"""``enable_call_trace``: print every Python function call (and where it was called from)."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any, TextIO

__all__ = ["enable_call_trace"]


def enable_call_trace(file: TextIO | None = None) -> None:
    """From now on, in this thread, write ``Call to `f` on line file:line from file:line`` to
    ``file`` (stdout by default) for every Python function called (``sys.settrace``).

    Calls of functions named ``write`` or ``print`` (the tracing's own output) are not shown.
    ``sys.settrace(None)`` stops it.
    """

    def tracer(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        if code.co_name in ("write", "print") or frame.f_back is None:
            return
        caller = frame.f_back
        out = sys.stdout if file is None else file
        out.write(
            f"Call to `{code.co_name}` on line {code.co_filename}:{frame.f_lineno} "
            f"from {caller.f_code.co_filename}:{caller.f_lineno}\n"
        )

    sys.settrace(tracer)
