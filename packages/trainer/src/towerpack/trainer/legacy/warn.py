"""The warning every removed name gives: what it was, where it is used, and what to write instead (the
reference map's ``older`` advice, so the warning, ``towerpack port``'s report and docs/migrating.md
say the same). Logged once per name, as the reference logged its deprecations."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from towerpack.port.reference_map import REFERENCE

from .. import logger

_F = TypeVar("_F", bound=Callable[..., Any])
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # towerpack/trainer
_warned: set[str] = set()


def removed_message(module: str, name: str, where: str) -> str:
    return (
        f"[Deprecated] {module}.{name} ({where}) was removed from tensorpack before 0.11 (towerpack keeps "
        f"it for older code): use {REFERENCE[module].older[name]}"
    )


def warn_removed(module: str, name: str) -> None:
    """Log, the first time ``name`` of the reference module ``module`` is used in this process, that
    it was removed before 0.11, naming the line of the user's code that used it."""
    key = f"{module}.{name}"
    if key in _warned:
        return
    _warned.add(key)
    logger.warning(removed_message(module, name, _caller()))


def _caller() -> str:
    """``file:line`` of the innermost frame outside towerpack.trainer (the user's call)."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE + os.sep):
        frame = frame.f_back
    return "unknown" if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def removed(module: str) -> Callable[[_F], _F]:
    """Decorate a kept function of the reference module ``module``: its first call warns
    (:func:`warn_removed`)."""

    def decorate(func: _F) -> _F:
        REFERENCE[module].older[func.__name__]  # a KeyError at import when the map lacks the name

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            warn_removed(module, func.__name__)
            return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
