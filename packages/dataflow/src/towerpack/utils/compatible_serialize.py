"""The reference's older module name for :mod:`towerpack.utils.serialize` (``loads``, ``dumps``)."""

from .serialize import dumps, loads

__all__ = ["dumps", "loads"]
