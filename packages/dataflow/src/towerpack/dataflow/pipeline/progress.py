"""Progress bars that also work in logs: :mod:`towerpack.utils.progress`, re-exported here for the
dataflow's and the trainer's callers (``get_tqdm`` in ``towerpack.utils`` shares these bars)."""

from towerpack.utils.progress import (
    DEFAULT_INTERVAL,
    INTERVAL_VAR,
    LAUNCHED_VAR,
    LineBar,
    progress_bar,
    progress_interval,
    writes_lines,
)

__all__ = [
    "DEFAULT_INTERVAL",
    "INTERVAL_VAR",
    "LAUNCHED_VAR",
    "LineBar",
    "progress_bar",
    "progress_interval",
    "writes_lines",
]
