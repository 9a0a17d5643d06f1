"""How far the tf.contrib table (contrib_table.py) reaches, for the documentation and its tests.

Two yardsticks: the tf.contrib names the reference (tensorpack 0.11) uses, measured once on its
examples and library with the port's own analysis (contrib_rewrite.py; the repository does not ship
those sources), and the names tf_upgrade_v2 converts or flags, read from the installed TensorFlow's
own tables (``tensorflow/tools/compatibility``) without importing TensorFlow.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .contrib_table import NEAREST, lookup

# Every tf.contrib name the reference's examples use (after `tensorflow_imports`), as tf.<path>.
REFERENCE_EXAMPLES = (
    "contrib.eager.enable_eager_execution",  # FasterRCNN/modeling/model_box.py
    "contrib.rnn.BasicLSTMCell",  # PennTreebank
    "contrib.rnn.DropoutWrapper",  # PennTreebank
    "contrib.rnn.LSTMBlockCell",  # CTC-TIMIT, Char-RNN
    "contrib.rnn.LSTMStateTuple",  # Char-RNN, PennTreebank
    "contrib.rnn.MultiRNNCell",  # CTC-TIMIT, Char-RNN, PennTreebank
    "contrib.rnn.static_rnn",  # Char-RNN, PennTreebank
    "contrib.slim.arg_scope",  # Saliency
    "contrib.slim.layers.conv2d",  # SimilarityLearning
    "contrib.slim.layers.flatten",  # SimilarityLearning
    "contrib.slim.layers.fully_connected",  # SimilarityLearning
    "contrib.slim.layers.max_pool2d",  # SimilarityLearning
    "contrib.slim.nets.resnet_v1.resnet_arg_scope",  # Saliency
    "contrib.slim.nets.resnet_v1.resnet_v1_50",  # Saliency
)
# The same for the reference's library (tensorpack/), most of it behind TensorFlow version checks.
REFERENCE_LIBRARY = (
    "contrib.compiler.xla.compile",
    "contrib.framework.add_model_variable",
    "contrib.graph_editor.get_backward_walk_ops",
    "contrib.layers.l1_regularizer",
    "contrib.layers.l2_regularizer",
    "contrib.layers.variance_scaling_initializer",
    "contrib.memory_stats.MaxBytesInUse",
    "contrib.nccl.all_sum",
    "contrib.nccl.ops.gen_nccl_ops.nccl_all_reduce",
    "contrib.nccl.python.ops.nccl_ops._validate_and_load_nccl_so",
    "contrib.training.GreedyLoadBalancingStrategy",
    "contrib.training.byte_size_load_fn",
)


@dataclass(frozen=True)
class Coverage:
    """Of ``total`` names, how many the port rewrites and how many it reports with a nearest
    replacement (the rest get their module's advice)."""

    total: int
    rewritten: int
    nearest: int


def coverage(paths: Iterable[str]) -> Coverage:
    paths = set(paths)
    found = [lookup(p) for p in paths]
    rewritten = sum(f is not None and f.rewrite is not None for f in found)
    nearest = sum(f is not None and f.key in NEAREST for f in found)
    return Coverage(len(paths), rewritten, nearest)


@dataclass(frozen=True)
class UpgradeV2:
    """tf_upgrade_v2's tf.contrib names: those it converts (renames, argument rewrites) and those it
    only flags for a person (warnings, TensorFlow Addons pointers). ``renames``: where it renames a
    name, the new one (``tf.nest.flatten``)."""

    converted: frozenset[str]
    flagged: frozenset[str]
    renames: dict[str, str]


def upgrade_v2() -> UpgradeV2:
    """Read from the installed TensorFlow's tf_upgrade_v2 tables; raises FileNotFoundError without them."""
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("TensorFlow is not installed: tf_upgrade_v2's tables are part of it")
    tables = Path(next(iter(spec.submodule_search_locations))) / "tools" / "compatibility"
    renames = _contrib_items(tables / "all_renames_v2.py", "manual_symbol_renames")
    addons = _contrib_items(tables / "all_renames_v2.py", "addons_symbol_mappings")
    transformers = _contrib_items(tables / "tf_upgrade_v2.py", "self.function_transformers")
    warnings = _contrib_items(tables / "tf_upgrade_v2.py", "self.function_warnings")
    converted = set(renames) | set(transformers)
    flagged = (set(addons) | set(warnings)) - converted
    new_names = {path: value for path, value in renames.items() if isinstance(value, str)}
    return UpgradeV2(frozenset(converted), frozenset(flagged), new_names)


def _contrib_items(path: Path, name: str) -> dict[str, object]:
    """The ``tf.contrib...`` items of the dict literal assigned to ``name`` in ``path``: contrib path ->
    value (the string, where it is one)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    items: dict[str, object] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Dict):
            continue
        if not any(ast.unparse(target) == name for target in node.targets):
            continue
        for key, value in zip(node.value.keys, node.value.values, strict=True):
            if isinstance(key, ast.Constant) and str(key.value).startswith("tf.contrib."):
                items[key.value[len("tf.") :]] = value.value if isinstance(value, ast.Constant) else None
    return items
