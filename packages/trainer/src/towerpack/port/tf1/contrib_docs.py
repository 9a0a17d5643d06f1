"""The tf.contrib part of docs/migrating.md, rendered from the table (contrib_table.py) and its coverage
(contrib_coverage.py); render_docs.py puts it between its markers."""

from __future__ import annotations

from .contrib_coverage import REFERENCE_EXAMPLES, REFERENCE_LIBRARY, coverage, upgrade_v2
from .contrib_table import CONTRIB_EXTRA, NEAREST, TABLE, Covers, Rewrite, shown


def _code(text: str) -> str:
    return f"`{text}`"


def _tf(path: str) -> str:
    return _code(f"tf.{path}")


def _counts() -> list[str]:
    examples, library = coverage(REFERENCE_EXAMPLES), coverage(REFERENCE_LIBRARY)
    left = [_tf(p) for p in REFERENCE_EXAMPLES if p in NEAREST]
    upgrade = upgrade_v2()
    converted, flagged = coverage(upgrade.converted), coverage(upgrade.flagged)
    # tf_upgrade_v2 writes a TensorFlow or Keras name for each; these go to tf-slim instead.
    elsewhere = sum(
        isinstance(TABLE.get(p), Rewrite) and not TABLE[p].target.module.startswith("tensorflow")
        for p in upgrade.converted
    )
    return [
        f"- The reference's examples use {examples.total} `tf.contrib` names: {examples.rewritten} are "
        f"rewritten, {examples.nearest} reported with the nearest replacement ({', '.join(left)}). Its "
        f"library uses {library.total}: {library.rewritten} rewritten, {library.nearest} reported with the "
        f"nearest replacement, {library.total - library.rewritten - library.nearest} with their module's "
        "advice (NCCL, XLA and graph_editor internals that towerpack does in its own way).",
        f"- tf_upgrade_v2, TensorFlow's own upgrade script, converts {converted.total} `tf.contrib` names: "
        f"`towerpack port` rewrites {converted.rewritten} of them ({elsewhere} to the exact home where "
        f"tf_upgrade_v2's replacement behaves differently, see the notes) and reports the other "
        f"{converted.total - converted.rewritten} with the nearest replacement. It flags "
        f"{flagged.total} more for a person: {flagged.rewritten} of those are rewritten here, "
        f"{flagged.nearest} reported with the nearest replacement.",
    ]


def _rewrite_rows() -> list[str]:
    """One row per (contrib module, home module): the names that move from one to the other."""
    groups: dict[tuple[str, str], list[str]] = {}
    for path, entry in TABLE.items():
        if entry.covers is Covers.LISTED:
            continue  # a module: its names have rows of their own
        parent, _, name = path.rpartition(".")
        home, _, new = entry.target.dotted.rpartition(".")
        shown_name = name if new == name else f"{name} ({new})"
        groups.setdefault((parent, home), []).append(
            shown_name + (".*" if entry.covers is Covers.ALL else "")
        )
    return [
        f"| {_tf(parent)} | {_code(shown(home))} | {', '.join(map(_code, names))} |"
        for (parent, home), names in groups.items()
    ]


def _note(entry: Rewrite) -> str:
    parts = [entry.note] if entry.note else []
    if entry.max_positional is not None:
        parts.append(f"rewritten where a call passes at most {entry.max_positional} argument(s) by position")
    if entry.unsupported:
        parts.append(f"not where a call passes {', '.join(map(_code, entry.unsupported))}")
    if entry.renamed:
        parts.append("keywords renamed: " + ", ".join(f"`{old}` to `{new}`" for old, new in entry.renamed))
    return "; ".join(parts)


def lines() -> list[str]:
    notes = [
        f"| {_tf(path)} | {_code(entry.target.shown)} | {_note(entry)} |"
        for path, entry in TABLE.items()
        if _note(entry)
    ]
    nearest = [
        f"| {_tf(path)} | {_code(shown(entry.api)) if entry.api else '-'} | {entry.differs} |"
        for path, entry in NEAREST.items()
    ]
    return [
        "`towerpack port` rewrites a `tf.contrib` name where a maintained package keeps it with the same",
        "behaviour, defaults included, and reports the others with the nearest replacement and how it",
        "differs. The homes outside TensorFlow come with the `contrib` extra of towerpack-trainer",
        f"(`{CONTRIB_EXTRA}`): tf-slim 1.1.0 (contrib.slim, contrib.layers and",
        "contrib.framework's arg_scope and variable helpers, moved out of TensorFlow unchanged) and",
        "TensorFlow Probability 0.25 (contrib.distributions' successor), installed without TFP's own `[tf]`",
        "extra, which would put the `tensorflow` wheel beside `tensorflow-cpu`. The report names a home",
        "that is not installed.",
        "",
        *_counts(),
        "",
        "The rewrite follows the imports: `tf.contrib.layers.l2_regularizer(1e-4)` becomes",
        "`tf_slim.l2_regularizer(1e-4)` and `import tf_slim` is added once; `slim = tf.contrib.slim`,",
        "`from tensorflow.contrib import slim` and `import tensorflow.contrib.slim as slim` become",
        "`import tf_slim as slim` when every use of `slim` has its home there (else each use is rewritten",
        "and `slim` stays for the rest, which the report names); `from tensorflow.contrib.framework import",
        "arg_scope` becomes `from tf_slim import arg_scope`. `import tensorflow.contrib.x` without `as` is",
        "left to the report.",
        "",
        "| tf.contrib | home | names (new name in parentheses; `.*`: the whole module) |",
        "|---|---|---|",
        *_rewrite_rows(),
        "",
        "Notes, and the calls the rewrite leaves alone (where the home added a parameter among the old",
        "ones or dropped one):",
        "",
        "| tf.contrib name | home | note |",
        "|---|---|---|",
        *notes,
        "",
        "Reported with the nearest replacement (not rewritten):",
        "",
        "| tf.contrib name | nearest | how it differs |",
        "|---|---|---|",
        *nearest,
    ]
