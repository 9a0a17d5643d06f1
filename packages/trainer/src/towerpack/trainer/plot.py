"""Training curves from ``stats.json``: ``python -m towerpack.trainer.plot LOGDIR [--out F]``.

One panel per scalar, plotted against ``global_step``. Needs the ``plot`` extra (matplotlib).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

__all__ = ["PlotError", "load_stats", "plot_stats"]

#: Bookkeeping keys of every stats.json record; they are not plotted as panels.
_META_KEYS = ("epoch_num", "global_step")


class PlotError(Exception):
    """stats.json is missing, unreadable or has nothing to plot."""


def _stats_file(logdir: str) -> str:
    if os.path.isfile(logdir):
        return logdir
    return os.path.join(logdir, "stats.json")


def load_stats(logdir: str) -> list[dict]:
    """The records of ``<logdir>/stats.json`` (``logdir`` may also be the file itself)."""
    fname = _stats_file(logdir)
    if not os.path.exists(fname):
        raise PlotError(f"{fname} does not exist: is {logdir} a training log directory?")
    try:
        with open(fname, encoding="utf-8") as f:
            stats = json.load(f)
    except (OSError, ValueError) as e:
        raise PlotError(f"cannot read {fname}: {e}") from None
    if not isinstance(stats, list) or not all(isinstance(r, dict) for r in stats):
        raise PlotError(f"{fname} is not a list of records (is it a towerpack stats.json?)")
    if not stats:
        raise PlotError(f"{fname} has no records yet: train for at least one epoch first")
    return stats


def _series(stats: list[dict]) -> dict[str, tuple[list[float], list[float]]]:
    series: dict[str, tuple[list[float], list[float]]] = {}
    for i, record in enumerate(stats):
        step = record.get("global_step", i)
        for name, value in record.items():
            if name in _META_KEYS or not isinstance(value, (int, float)):
                continue
            xs, ys = series.setdefault(name, ([], []))
            xs.append(step)
            ys.append(value)
    return dict(sorted(series.items()))


def plot_stats(logdir: str, out: str | None = None) -> str:
    """Write the PNG of every scalar in ``<logdir>/stats.json``; returns its path.

    ``out`` defaults to ``<logdir>/training_curves.png``.
    """
    series = _series(load_stats(logdir))
    fname = _stats_file(logdir)
    if not series:
        raise PlotError(f"{fname} has records but no scalars to plot")
    try:
        import matplotlib
    except ImportError:
        raise PlotError("matplotlib is needed: pip install 'towerpack-trainer[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = out or os.path.join(os.path.dirname(fname), "training_curves.png")
    cols = min(3, len(series))
    rows = math.ceil(len(series) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.2 * rows), squeeze=False)
    for ax, (name, (xs, ys)) in zip(axes.flat, series.items(), strict=False):
        ax.plot(xs, ys, marker="." if len(xs) < 30 else None)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("global step")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(series) :]:
        ax.set_visible(False)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m towerpack.trainer.plot",
        description="Plot the scalars of a training log's stats.json.",
    )
    parser.add_argument("logdir", help="training log directory (or its stats.json)")
    parser.add_argument("--out", help="PNG to write (default: LOGDIR/training_curves.png)")
    args = parser.parse_args(argv)
    try:
        out = plot_stats(args.logdir, args.out)
    except PlotError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
