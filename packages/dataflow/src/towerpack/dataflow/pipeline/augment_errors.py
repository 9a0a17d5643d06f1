"""AugmentErrors: count the errors of an augmenting dataflow, and either raise them or log and drop.

The reference's ``ExceptionHandler``. Its docstring promised warnings only past 100 errors while
the code logged the first nine; here the first ten errors are logged, then every hundredth, each
with its traceback.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

__all__ = ["AugmentErrors"]

logger = logging.getLogger("towerpack.dataflow.image.dataflows")

#: Errors logged one by one before only every ``LOG_EVERY``-th is.
LOG_FIRST = 10
LOG_EVERY = 100


class AugmentErrors:
    """Counts errors raised inside :meth:`catch`; re-raises them unless ``catch_exceptions``.

    A caught error leaves the ``with`` block early and is logged (see the module docstring);
    the caller then drops the datapoint. ``count`` is per process (each worker counts its own).
    """

    def __init__(self, catch_exceptions: bool = False, owner: str = "augmentation") -> None:
        self.catch_exceptions = bool(catch_exceptions)
        self.owner = owner
        self.count = 0

    @contextlib.contextmanager
    def catch(self) -> Iterator[None]:
        try:
            yield
        except Exception:
            self.count += 1
            if not self.catch_exceptions:
                raise
            if self.count <= LOG_FIRST or self.count % LOG_EVERY == 0:
                logger.exception("%s: %d augmentation errors; dropped this datapoint", self.owner, self.count)
