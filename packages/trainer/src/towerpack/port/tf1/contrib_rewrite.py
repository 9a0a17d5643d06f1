"""Rewrites a module's tf.contrib uses that have an exact home (contrib_table.py), and finds those left.

Runs after imports.py, so ``tf`` is ``tensorflow.compat.v1``; contrib_uses.py finds
the uses. A use reaches contrib
through a TensorFlow import (``tf.contrib.layers.l2_regularizer(1e-4)``), through an import of
contrib itself (``from tensorflow.contrib import slim``, ``import tensorflow.contrib.slim as slim``,
``from tensorflow.contrib.framework import arg_scope``) or through a name assigned a contrib module
(``slim = tf.contrib.slim``). A binding whose every use has its home in one module becomes an import
of that module (``import tf_slim as slim``); otherwise each use with a home is rewritten in place
(``tf_slim.conv2d``, with ``import tf_slim`` added once) and the binding stays for the uses without
one, which the report names. ``import tensorflow.contrib.x`` without ``as`` is left to the report.
"""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from ..findings import Finding, Kind
from ..syntax import (
    ReplacesUses,
    dotted,
    expression,
    from_imports,
    from_module,
    one_statement_a_line,
)
from .contrib_table import CONTRIB_EXTRA, Found, Rewrite, Target, lookup
from .contrib_uses import PACKAGES, V1, Binding, Finder, Use
from .removed import contrib_advice

# How a rewritten use names each home's package: the import it needs and the prefix it writes.
_PACKAGE_IMPORTS = {
    "tf_slim": ("import tf_slim", "tf_slim"),
    "tf_slim.nets": ("import tf_slim.nets", "tf_slim.nets"),
    "tensorflow_probability": ("import tensorflow_probability as tfp", "tfp"),
}
_ADDED_TF = ("import tensorflow.compat.v1 as tf", "tf")


@dataclass
class _Plan:
    uses: dict[cst.CSTNode, str] = field(default_factory=dict)  # use -> new expression
    keywords: dict[cst.Call, dict[str, str]] = field(default_factory=dict)  # call -> renamed keywords
    aliases: dict[cst.ImportAlias, list[cst.BaseSmallStatement] | None] = field(default_factory=dict)
    assigns: dict[cst.Assign, cst.BaseSmallStatement | None] = field(default_factory=dict)
    imports: list[str] = field(default_factory=list)  # statements to add, in order

    def __bool__(self) -> bool:
        return bool(self.uses or self.keywords or self.aliases or self.assigns)


def rewrite(module: cst.Module) -> cst.Module:
    """``module`` with the tf.contrib uses that have an exact home rewritten."""
    if "contrib" not in module.code:
        return module
    wrapper = MetadataWrapper(module)
    finder = Finder()
    wrapper.visit(finder)
    plan = _Planner(finder).plan()
    if not plan:
        return module
    return wrapper.module.visit(_Rewriter(plan, finder.anchor))


def leftovers(wrapper: MetadataWrapper, path: str) -> list[Finding]:
    """What a ported module still needs for tf.contrib: the uses left behind names assigned a contrib
    module (``rnn = tf.contrib.rnn`` ... ``rnn.LSTMBlockCell``; the TensorFlow report sees only
    imports), and the homes it imports that are not installed here."""
    code = wrapper.module.code
    if not any(word in code for word in ("contrib", *PACKAGES)):
        return []
    finder = Finder()
    wrapper.visit(finder)
    positions = wrapper.resolve(PositionProvider)
    out = []
    for binding in finder.bindings:
        if not isinstance(binding.statement, cst.Assign):
            continue
        for use in binding.uses:
            if use.node is binding.statement.value:
                continue
            written = dotted(use.node) or binding.local
            message = f"`{written}` (tf.{use.path}): {contrib_advice(use.path)}"
            out.append(Finding(path, positions[use.node].start.line, Kind.TF_CONTRIB, message))
    for node, package in finder.homes:
        if not _installed(package):
            message = f"`{package}` is not installed here: {CONTRIB_EXTRA}"
            out.append(Finding(path, positions[node].start.line, Kind.TF_CONTRIB, message))
    return out


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except ValueError:  # a module blocked in sys.modules
        return False


class _Planner:
    def __init__(self, finder: Finder) -> None:
        self.finder = finder
        self._plan = _Plan()
        self._tf: str | None = None

    def plan(self) -> _Plan:
        bound_values = set()
        for binding in self.finder.bindings:
            if isinstance(binding.statement, cst.Assign):
                bound_values.add(binding.statement.value)
            self._binding(binding)
        for node, use in self.finder.direct.items():
            if node not in bound_values:
                self._rewrite_use(use)
        return self._plan

    def _binding(self, binding: Binding) -> None:
        found = lookup(binding.path)
        home = found.rewrite if found is not None else None
        own_uses = [u for u in binding.uses if u.node is not getattr(binding.statement, "value", None)]
        whole = home is not None and found is not None and not found.rest
        new = self._import_as(home.target, binding.local) if whole and home is not None else None
        if (
            new is not None
            and home is not None
            and all(self._under(home.target, binding.path, u) for u in own_uses)
        ):
            for use in own_uses:
                self._keywords(use, lookup(use.path))
            self._replace_binding(binding, new)
            return
        done = [self._rewrite_use(use) for use in own_uses]
        if done and all(done):  # else the binding stays for the uses without a home
            self._replace_binding(binding, None)

    def _under(self, target: Target, path: str, use: Use) -> bool:
        """Whether ``use`` keeps its name under ``target`` (the new home of ``path``)."""
        found = lookup(use.path)
        rewrite = found.rewrite if found is not None else None
        if found is None or rewrite is None or not _call_fits(rewrite, use):
            return False
        return found.target().dotted == target.dotted + use.path[len(path) :]

    def _replace_binding(self, binding: Binding, new: list[cst.BaseSmallStatement] | None) -> None:
        if isinstance(binding.statement, cst.Assign):
            self._plan.assigns[binding.statement] = None if new is None else _one(new)
        else:
            assert binding.alias is not None
            self._plan.aliases[binding.alias] = new

    def _import_as(self, target: Target, local: str) -> list[cst.BaseSmallStatement] | None:
        """The import that binds ``local`` to ``target``; None if there is none."""
        where = target.from_import()
        if where is None:
            return None
        parent, name = where
        if not parent:
            asname = None if local == name else local
            return [cst.Import(names=[cst.ImportAlias(expression(name), _as(asname))])]
        return list(from_imports([(parent, name, None if local == name else local, None)], multiline=False))

    def _keywords(self, use: Use, found: Found | None) -> None:
        rewrite = found.rewrite if found is not None else None
        if rewrite is not None and rewrite.renamed and use.call is not None:
            self._plan.keywords[use.call] = dict(rewrite.renamed)

    def _rewrite_use(self, use: Use) -> bool:
        """Plan ``use``'s rewrite; whether it has one."""
        found = lookup(use.path)
        rewrite = found.rewrite if found is not None else None
        if found is None or rewrite is None or not _call_fits(rewrite, use):
            return False
        target = found.target()
        prefix = self._prefix(target.module)
        if prefix is None:
            return False
        self._plan.uses[use.node] = f"{prefix}.{target.path}" if target.path else prefix
        self._keywords(use, found)
        return True

    def _prefix(self, module: str) -> str | None:
        """How the code names ``module``, adding its import if needed; None if it cannot."""
        if module == V1:
            return self._tensorflow()
        statement, prefix = _PACKAGE_IMPORTS[module]
        self._need(statement)
        return prefix

    def _tensorflow(self) -> str | None:
        if self._tf is None:
            for local, v1 in self.finder.roots:
                self._tf = local if v1 else f"{local}.compat.v1"
                break
            else:
                statement, local = _ADDED_TF
                if local in self.finder.globals:
                    return None
                self._need(statement)
                self._tf = local
        return self._tf

    def _need(self, statement: str) -> None:
        if statement not in self.finder.imports and statement not in self._plan.imports:
            self._plan.imports.append(statement)


def _call_fits(rewrite: Rewrite, use: Use) -> bool:
    """Whether ``use`` may take the new home: a constrained name must be called within its limits."""
    if not rewrite.constrained:
        return True
    call = use.call
    if call is None:
        return False
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in call.args):
        return False
    if rewrite.max_positional is not None and len(positional) > rewrite.max_positional:
        return False
    keywords = {a.keyword.value for a in call.args if a.keyword is not None}
    return not keywords & set(rewrite.unsupported)


def _as(asname: str | None) -> cst.AsName | None:
    return None if asname is None else cst.AsName(name=cst.Name(asname))


def _one(statements: list[cst.BaseSmallStatement]) -> cst.BaseSmallStatement:
    assert len(statements) == 1
    return statements[0]


class _Rewriter(ReplacesUses, cst.CSTTransformer):
    def __init__(self, plan: _Plan, anchor: cst.SimpleStatementLine | None) -> None:
        super().__init__()
        self.plan = plan
        self.anchor = anchor
        self.added = not plan.imports
        self._next: dict[cst.CSTNode, cst.CSTNode] = {}  # statement -> the one after it
        self._carried: dict[cst.CSTNode, Sequence[cst.EmptyLine]] = {}

    # A removed line's blank lines and comments go to the statement after it.
    def _siblings(self, body: Sequence[cst.CSTNode]) -> None:
        self._next.update(itertools.pairwise(body))

    def visit_Module(self, node):
        self._siblings(node.body)

    def visit_IndentedBlock(self, node):
        self._siblings(node.body)

    def on_leave(self, original_node, updated_node):
        result = super().on_leave(original_node, updated_node)
        carried = self._carried.pop(original_node, None)
        if carried and isinstance(result, cst.SimpleStatementLine | cst.BaseCompoundStatement):
            own = list(result.leading_lines)
            if own:
                carried = [line for line in carried if line.comment is not None]
            result = result.with_changes(leading_lines=[*carried, *own])
        return result

    def leave_Call(self, original_node, updated_node):
        renamed = self.plan.keywords.get(original_node)
        if not renamed:
            return updated_node
        args = [
            a.with_changes(keyword=cst.Name(renamed[a.keyword.value]))
            if a.keyword is not None and a.keyword.value in renamed
            else a
            for a in updated_node.args
        ]
        return updated_node.with_changes(args=args)

    def leave_Assign(self, original_node, updated_node):
        if original_node not in self.plan.assigns:
            return updated_node
        new = self.plan.assigns[original_node]
        return cst.RemoveFromParent() if new is None else new

    def leave_Import(self, original_node, updated_node):
        return self._statement(original_node, updated_node, updated_node.names)

    def leave_ImportFrom(self, original_node, updated_node):
        if isinstance(original_node.names, cst.ImportStar):
            return updated_node
        return self._statement(original_node, updated_node, updated_node.names)

    def _statement(self, original, updated, names):
        if not any(a in self.plan.aliases for a in original.names):
            return updated
        kept: list[cst.ImportAlias] = []
        added: list[cst.BaseSmallStatement] = []
        for old, new in zip(original.names, names, strict=True):
            if old not in self.plan.aliases:
                kept.append(new)
            elif self.plan.aliases[old] is not None:
                added += self.plan.aliases[old]
        statements = []
        if kept:
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            statements.append(updated.with_changes(names=kept))
        statements += _merge(added)
        if not statements:
            return cst.RemoveFromParent()
        return statements[0] if len(statements) == 1 else cst.FlattenSentinel(statements)

    def leave_SimpleStatementLine(self, original_node, updated_node):
        line = one_statement_a_line(original_node, updated_node)
        if not updated_node.body and original_node.leading_lines and original_node in self._next:
            self._carried[self._next[original_node]] = original_node.leading_lines
        if original_node is not self.anchor or self.added:
            return line
        self.added = True
        lines = list(line.nodes) if isinstance(line, cst.FlattenSentinel) else [line] if line.body else []
        return cst.FlattenSentinel([*lines, *self._added()])

    def leave_Module(self, original_node, updated_node):
        if self.added:
            return updated_node
        body = list(updated_node.body)
        at = 0
        while at < len(body) and _docstring_or_future(body[at]):
            at += 1
        return updated_node.with_changes(body=[*body[:at], *self._added(), *body[at:]])

    def _added(self) -> Iterator[cst.SimpleStatementLine]:
        for code in self.plan.imports:
            statement = cst.parse_statement(code + "\n")
            assert isinstance(statement, cst.SimpleStatementLine)
            yield statement


def _merge(statements: list[cst.BaseSmallStatement]) -> list[cst.BaseSmallStatement]:
    """Statements importing from the same module merged into one ``from`` line."""
    froms = [s for s in statements if isinstance(s, cst.ImportFrom)]
    if len(froms) < 2:
        return statements
    items = []
    for s in froms:
        assert not isinstance(s.names, cst.ImportStar)
        for a in s.names:
            items.append((from_module(s), a.name.value, dotted(a.asname.name) if a.asname else None, None))
    merged: list[cst.BaseSmallStatement] = list(from_imports(items, multiline=False))
    return [s for s in statements if not isinstance(s, cst.ImportFrom)] + merged


def _docstring_or_future(statement: cst.BaseStatement) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    small = statement.body[0]
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString | cst.ConcatenatedString):
        return True
    return isinstance(small, cst.ImportFrom) and from_module(small) == "__future__"
