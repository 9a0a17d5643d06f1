"""StopTraining: the exception that ends training cleanly, raised by callbacks, steps and trainers."""

from __future__ import annotations

__all__ = ["StopTraining"]


class StopTraining(BaseException):
    """Raise from a callback or ``run_step`` to end training cleanly after the current step."""
