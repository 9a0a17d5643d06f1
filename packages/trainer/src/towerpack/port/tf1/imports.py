"""Rewrites TensorFlow 1 imports for TensorFlow 2.21 in graph mode.

- ``import tensorflow as tf`` becomes ``import tensorflow.compat.v1 as tf``: the TF 1 names
  (``tf.placeholder``, ``tf.train.AdamOptimizer``, ...) are there, and towerpack turns eager off.
- ``from tensorflow import X`` takes X from ``tensorflow.compat.v1`` as well, except ``compat``,
  ``python`` and ``contrib`` (the same there, or gone: the report names contrib).
- Keras: ``tf.keras`` of TF 1 was Keras 2; in TF 2.21 it is Keras 3, which has no graph mode, so
  ``from tensorflow import keras`` becomes ``import tf_keras as keras`` and ``tensorflow.keras.x``
  becomes ``tf_keras.x`` (the tf-keras package).

Left alone: ``import tensorflow`` without an alias (its uses are checked, not rewritten), imports
of ``tensorflow.python...`` (TensorFlow's internals, the same module in TF 2) and anything already
written for TF 2 (``tensorflow.compat.v1``).
"""

from __future__ import annotations

import libcst as cst

from ..syntax import dotted, expression, from_imports, from_module, import_alias_name, one_statement_a_line

V1 = "tensorflow.compat.v1"
KERAS = "tf_keras"
_SAME_IN_V2 = frozenset({"compat", "python", "contrib"})


def rewrite(module: cst.Module) -> cst.Module:
    return module.visit(_Rewriter())


def _keras(path: str) -> str | None:
    """``tf_keras...`` for ``tensorflow.keras...``, else None."""
    if path == "tensorflow.keras" or path.startswith("tensorflow.keras."):
        return KERAS + path[len("tensorflow.keras") :]
    return None


class _Rewriter(cst.CSTTransformer):
    def leave_Import(self, original_node, updated_node):
        aliases = []
        for alias in updated_node.names:
            name = import_alias_name(alias)
            new = (V1 if name == "tensorflow" else _keras(name)) if alias.asname is not None else None
            aliases.append(alias if new is None else alias.with_changes(name=expression(new)))
        return updated_node.with_changes(names=aliases)

    def leave_ImportFrom(self, original_node, updated_node):
        module = from_module(updated_node)
        if module is None:
            return updated_node
        keras = _keras(module)
        if keras is not None:
            return updated_node.with_changes(module=expression(keras))
        if module != "tensorflow":
            return updated_node
        if isinstance(updated_node.names, cst.ImportStar):
            return updated_node.with_changes(module=expression(V1))
        names = [(a.name.value, dotted(a.asname.name) if a.asname else None) for a in updated_node.names]
        if all(n in _SAME_IN_V2 for n, _ in names):
            return updated_node
        if not any(n == "keras" or n in _SAME_IN_V2 for n, _ in names):
            return updated_node.with_changes(module=expression(V1))
        keras_imports = [_import_as(KERAS, asname or "keras") for n, asname in names if n == "keras"]
        others = [(("tensorflow" if n in _SAME_IN_V2 else V1), n, a, None) for n, a in names if n != "keras"]
        statements = keras_imports + from_imports(others, multiline=False)
        return statements[0] if len(statements) == 1 else cst.FlattenSentinel(statements)

    def leave_SimpleStatementLine(self, original_node, updated_node):
        return one_statement_a_line(original_node, updated_node)


def _import_as(module: str, asname: str) -> cst.Import:
    return cst.Import(
        names=[cst.ImportAlias(name=expression(module), asname=cst.AsName(name=cst.Name(asname)))]
    )
