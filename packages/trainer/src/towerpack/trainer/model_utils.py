"""Describing a model in the log: its trainable variables as a table with the parameter count
and size (``describe_trainable_vars``), and tensor shapes as text (``get_shape_str``, also what
layers log). ``format_table`` lays out such tables as plain text.
"""

from __future__ import annotations

from . import logger
from .compat import tf, tfv1

__all__ = ["describe_trainable_vars", "format_table", "get_shape_str"]


def format_table(rows, headers=None) -> str:
    """``rows`` (sequences of values, all of one length) as left-aligned text columns two spaces
    apart; ``headers`` adds a title line and a line of dashes under it."""
    lines = [[str(v) for v in row] for row in rows]
    if headers is not None:
        lines.insert(0, [str(h) for h in headers])
    if not lines:
        return ""
    widths = [max(map(len, column)) for column in zip(*lines, strict=True)]
    if headers is not None:
        lines.insert(1, ["-" * w for w in widths])
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def _shape_text(t) -> str:
    if not isinstance(t, (tf.Tensor, tf.Variable)):
        raise TypeError(f"get_shape_str takes a tensor, a variable or a list of them, got {type(t).__name__}")
    if t.shape.rank is None:
        return "<unknown>"
    return "[" + ", ".join("?" if d is None else str(d) for d in t.shape.as_list()) + "]"


def get_shape_str(tensors) -> str:
    """The static shape of a tensor or variable as text, ``[?, 28, 28, 1]`` (``?``: unknown
    dimension, ``<unknown>``: unknown rank); for a list, the shapes joined by ``", "``.

    Raises:
        TypeError: something that is not a tensor or variable.
    """
    if isinstance(tensors, (list, tuple)):
        return ", ".join(_shape_text(t) for t in tensors)
    return _shape_text(tensors)


def describe_trainable_vars() -> None:
    """Log the trainable variables of the default graph as a table (name, shape, number of
    elements; the device and the dtype only when they differ between variables), then their
    count, the number of parameters and the memory they take.

    Variables whose name starts with ``tower`` (the copies of other towers) are left out. A
    variable whose shape is not fully known counts 0 elements, with a warning.
    """
    variables = [
        v for v in tfv1.get_collection(tfv1.GraphKeys.TRAINABLE_VARIABLES) if not v.name.startswith("tower")
    ]
    if not variables:
        logger.warning("No trainable variables in the graph")
        return
    rows, total, total_bytes = [], 0, 0
    for v in variables:
        count = v.shape.num_elements()
        if count is None:
            logger.warning(
                "Variable %s has a shape that is not fully known, %s: counted as 0", v.op.name, v.shape
            )
            count = 0
        total += count
        total_bytes += count * v.dtype.base_dtype.size
        rows.append([v.op.name, get_shape_str(v), count, v.device, v.dtype.base_dtype.name])
    headers = ["name", "shape", "#elements", "device", "dtype"]
    # The device only when the variables are on several, the dtype only when one is not float32.
    keep = [True, True, True, len({r[3] for r in rows}) > 1, {r[4] for r in rows} != {"float32"}]
    table = format_table(
        [[x for x, k in zip(r, keep, strict=True) if k] for r in rows],
        headers=[h for h, k in zip(headers, keep, strict=True) if k],
    )
    logger.info(
        "Trainable variables:\n%s\nNumber of trainable variables: %d\nNumber of parameters (elements): %d\n"
        "Storage space needed for all trainable variables: %.2f MB",
        table,
        len(rows),
        total,
        total_bytes / 1024**2,
    )
