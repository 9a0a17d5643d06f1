"""The reference's ``tensorpack.utils.utils``: environment, random generators, run-once, progress bars.

Random generators follow towerpack's seeding (:mod:`towerpack.dataflow.pipeline.seeding`), not the
reference's: ``get_rng`` gives each call its own stream, which ``fix_rng_seed`` makes reproducible
without every dataflow worker and rank drawing the same numbers. Both load the dataflow's seeding
module when first used (this module does not import ``towerpack.dataflow`` at import time, so the
dataflow can use ``towerpack.utils``).

``get_tqdm`` makes the bars of :mod:`towerpack.utils.progress`: a tqdm bar on a terminal, plain
lines at an interval in a log file or a pipe.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import inspect
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import tqdm

from .progress import progress_bar, progress_interval, writes_lines

__all__ = [
    "change_env",
    "execute_only_once",
    "fix_rng_seed",  # noqa: F822  (given by the module's __getattr__)
    "get_rng",
    "get_tqdm",
    "humanize_time_delta",
]

_log = logging.getLogger(__name__)

#: The reference's variable for the refresh interval of progress bars (seconds).
REFRESH_VAR = "TENSORPACK_PROGRESS_REFRESH"
#: Refresh interval of a bar drawn on a terminal.
TERMINAL_REFRESH = 0.5


@contextlib.contextmanager
def change_env(name: str, val: str | None) -> Iterator[None]:
    """Set environment variable ``name`` to ``val`` (unset it for None) inside the block.

    The old value (or its absence) comes back when the block ends, also when it raises (the
    reference restored nothing then).
    """
    old = os.environ.get(name)
    if val is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = str(val)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def __getattr__(name: str) -> Any:
    # ``fix_rng_seed`` is the dataflow's (seeding.py), re-exported on first use.
    if name == "fix_rng_seed":
        from towerpack.dataflow.pipeline.seeding import fix_rng_seed

        return fix_rng_seed
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_rng(obj: Any = None) -> np.random.RandomState:
    """A ``RandomState`` with a stream of its own (``obj`` is accepted for the reference's callers).

    Without a job seed every call draws fresh entropy. With one (``fix_rng_seed(seed)`` or
    ``TOWERPACK_SEED``), the stream is a function of the seed, the rank, the dataflow worker and
    how many streams this process made before, as augmentors' streams are: a script run again
    with the same seed and layout draws the same numbers, and no two workers or ranks share a
    stream (the reference gave every call the very same seed).
    """
    from towerpack.dataflow.pipeline.seeding import new_stream_key, stream_seed

    return np.random.RandomState(stream_seed(new_stream_key()) % 2**32)


_EXECUTED: set[tuple[str, int]] = set()


def execute_only_once() -> bool:
    """True the first time it is called from a given line of code, False every later time.

    ``if execute_only_once(): logger.warn(...)`` says something once per process.
    """
    frame = sys._getframe(1)
    key = (frame.f_code.co_filename, frame.f_lineno)
    if key in _EXECUTED:
        return False
    _EXECUTED.add(key)
    return True


def get_tqdm_kwargs(**kwargs: Any) -> dict[str, Any]:
    """The keyword arguments ``get_tqdm`` gives tqdm: its defaults updated with ``kwargs``.

    The refresh interval (``mininterval``) is ``$TENSORPACK_PROGRESS_REFRESH`` if set, else half a
    second on a terminal, else the interval of progress lines in logs
    (:func:`towerpack.utils.progress.progress_interval`: ``$TOWERPACK_PROGRESS_INTERVAL`` or 30 s).
    """
    file = kwargs.get("file") or sys.stderr
    refresh = os.environ.get(REFRESH_VAR, "").strip()
    if refresh:
        try:
            interval = float(refresh)
        except ValueError:
            raise ValueError(f"{REFRESH_VAR}={refresh!r} is not a number of seconds") from None
    elif writes_lines(file):
        interval = progress_interval()
    else:
        interval = TERMINAL_REFRESH
    return {"smoothing": 0.5, "dynamic_ncols": True, "ascii": True, "mininterval": interval, **kwargs}


_TQDM_PARAMS = [
    p.name
    for p in list(inspect.signature(tqdm.tqdm.__init__).parameters.values())[1:]
    if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
]


def get_tqdm(*args: Any, **kwargs: Any) -> tqdm.tqdm:
    """A tqdm bar with ``get_tqdm_kwargs`` (tqdm's own arguments, positional ones too).

    On a terminal (or under ``launch``, which draws ranks' bars) it is a tqdm bar; in a log file
    or a pipe it writes one plain line every ``mininterval`` seconds and one when it ends.
    """
    if len(args) > len(_TQDM_PARAMS):
        raise TypeError(f"get_tqdm takes at most {len(_TQDM_PARAMS)} positional arguments")
    named = dict(zip(_TQDM_PARAMS, args, strict=False))
    both = sorted(set(named) & set(kwargs))
    if both:
        raise TypeError(f"get_tqdm got multiple values for {', '.join(both)}")
    options = get_tqdm_kwargs(**named, **kwargs)
    if options.get("total") is None and hasattr(options.get("iterable"), "__len__"):
        options["total"] = len(options["iterable"])  # so that a log line shows n/total too
    file = options.get("file") or sys.stderr
    return progress_bar(interval=options["mininterval"] if writes_lines(file) else None, **options)


_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


def humanize_time_delta(sec: float, max_units: int | None = None) -> str:
    """``3725`` -> ``'1 hour 2 minutes 5 seconds'``; under a minute the seconds keep 3 digits
    (``0.01`` -> ``'0.01 seconds'``).

    Args:
        sec: a duration in seconds; a negative one is logged as a warning and printed as it is.
        max_units: keep only the first this many non-zero units (``2``: ``'1 hour 2 minutes'``).
    """
    if sec < 0:
        _log.warning("humanize_time_delta() got a negative duration: %s", sec)
        return f"{sec:.3g} seconds"
    if sec < 60:
        return f"{sec:.3g} {_plural('second', sec)}"
    parts = []
    rest = int(sec)
    for unit, size in _UNITS:
        n, rest = divmod(rest, size)
        if n:
            parts.append(f"{n} {_plural(unit, n)}")
    return " ".join(parts[:max_units])


def _plural(unit: str, value: float) -> str:
    return unit if value == 1 else unit + "s"


def find_library_full_path(name: str) -> str | None:
    """The full path of shared library ``lib<name>``: one already loaded in this process, else
    what the linker would load; None if it is not found."""
    pattern = re.compile(rf"/lib{re.escape(name)}(-[^/]*)?\.so[^/]*$")
    with contextlib.suppress(OSError), open(f"/proc/{os.getpid()}/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if pattern.search(path):
                return path
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            ["ldconfig", "-p"], capture_output=True, text=True, timeout=5, env={**os.environ, "LC_ALL": "C"}
        ).stdout
        for line in out.splitlines():
            path = line.rpartition("=>")[2].strip()
            if pattern.search(path):
                return path
    return ctypes.util.find_library(name)  # a file name the loader finds, not a full path
