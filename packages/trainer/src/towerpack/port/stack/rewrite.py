"""Applies the removal tables (numpy_table.py, table.py) to a module: names with an exact
replacement are rewritten where the code provably names the library's object, the others reported.

- ``np.float_`` becomes ``np.float64``, ``np.int`` becomes ``int`` (unless ``int`` is rebound in that
  scope), ``np.NINF`` becomes ``-np.inf``; ``from numpy import float_`` becomes ``from numpy import
  float64 as float_`` and ``from numpy import int`` goes (the builtin takes its place).
- A replacement in another module is imported where the import it replaces is plain: ``import
  collections`` gains ``import collections.abc`` for ``collections.Iterable``; ``from collections
  import Iterable`` becomes ``from collections.abc import Iterable``.
  Behind a module alias (``from scipy import interpolate``, ``import collections as C``) the
  replacement is written out in full with an ``import`` of its module, where that name is free.
- Anything else (no exact replacement, a name the rewrite cannot write) is left as written and
  ``leftovers`` reports it with its replacement.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider
from libcst.metadata.scope_provider import BuiltinAssignment, ImportAssignment

from ..findings import Finding
from ..syntax import alias_comment, dotted, from_imports, from_module, import_alias_name, one_statement_a_line
from .numpy_table import NUMPY
from .table import STACK, Removal, Status, Table
from .uses import Binding, PathUse, path_uses

TABLES: tuple[Table, ...] = (NUMPY, STACK)


@dataclass(frozen=True)
class _Target:
    """An exact replacement, parsed: ``module:name`` (``negate``: its negation), or a literal."""

    module: str | None
    name: str
    negate: bool = False

    @classmethod
    def parse(cls, new: str) -> _Target:
        negate = new.startswith("-") and ":" in new
        module, colon, name = new.removeprefix("-").partition(":") if negate else new.partition(":")
        return cls(module, name, negate) if colon else cls(None, new)


def _find(tables: Sequence[Table], path: str) -> tuple[Table, str, Removal] | None:
    """The entry for ``path`` or the longest module path it is under."""
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        for table in tables:
            if prefix in table.entries:
                return table, prefix, table.entries[prefix]
    return None


def _may_use(code: str, tables: Sequence[Table]) -> bool:
    """Whether ``code`` may name a table's entry: one of a package's removed names (its last part) in a
    ``from`` import of the package, or after a name an import of the package binds (``np.float_``,
    ``misc.imread``). A cheap test on the text, so that most modules skip the scope analysis."""
    leaves: dict[str, set[str]] = {}
    for table in tables:
        for path in table.entries:
            leaves.setdefault(path.partition(".")[0], set()).add(re.escape(path.rpartition(".")[2]))
    local_names: dict[str, set[str]] = {}  # package -> the names its imports bind
    for statement in re.finditer(r"^[ \t]*import[ \t]+([^\n#;]+)", code, re.MULTILINE):
        for part in statement.group(1).split(","):
            name, _, alias = part.strip().partition(" as ")
            root = name.partition(".")[0]
            if root in leaves:
                local_names.setdefault(root, set()).add(alias.strip() or root)
    from_import = r"^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]+(\([^)]*\)|.*)"
    for statement in re.finditer(from_import, code, re.MULTILINE):
        root = statement.group(1).partition(".")[0]
        if root not in leaves:
            continue
        names = re.sub(r"#.*", "", statement.group(2)).strip("()")
        if re.search(rf"\b(?:{'|'.join(leaves[root])})\b", names):
            return True
        local_names.setdefault(root, set()).update(p.split(" as ")[-1].strip() for p in names.split(","))
    for root, names in local_names.items():
        bound = "|".join(re.escape(n) for n in names if n)
        if bound and re.search(rf"\b(?:{bound})(?:\.\w+)*\.(?:{'|'.join(leaves[root])})\b", code):
            return True
    return False


@dataclass
class _Plan:
    uses: dict[cst.CSTNode, cst.BaseExpression] = field(default_factory=dict)
    statements: dict[cst.CSTNode, list[cst.BaseSmallStatement]] = field(default_factory=dict)
    imports_after: dict[cst.CSTNode, list[str]] = field(default_factory=dict)


def rewrite(module: cst.Module, tables: Sequence[Table] = TABLES) -> cst.Module:
    """``module`` with every removed name that has an exact replacement replaced."""
    if not _may_use(module.code, tables):
        return module
    wrapper = MetadataWrapper(module)
    bindings, uses = path_uses(wrapper, {r for t in tables for r in t.roots})
    plan = _Plan()
    parents = wrapper.resolve(ParentNodeProvider)
    imported = {import_alias_name(b.alias) for b in bindings.values() if isinstance(b.statement, cst.Import)}
    # ``from numpy import int`` goes, so its ``int`` counts as the builtin
    dropped = {key for key, b in bindings.items() if _dropped(tables, b)}
    for use in uses:
        _plan_use(plan, tables, use, parents, imported, dropped)
    statements = dict.fromkeys(
        b.statement for b in bindings.values() if isinstance(b.statement, cst.ImportFrom)
    )
    for statement in statements:
        _plan_from_import(plan, tables, statement, [b for b in bindings.values() if b.statement is statement])
    if not (plan.uses or plan.statements or plan.imports_after):
        return module
    return wrapper.module.visit(_Rewriter(plan))


def _exact(tables: Sequence[Table], binding: Binding) -> _Target | None:
    """The exact replacement of what ``binding`` imports, if it imports a removed name that has one."""
    found = _find(tables, binding.path)
    if found is None or found[1] != binding.path or found[2].new is None:
        return None
    return _Target.parse(found[2].new)


def _dropped(tables: Sequence[Table], binding: Binding) -> bool:
    """``from numpy import int``: an import of a builtin under its own name, which the rewrite drops."""
    target = _exact(tables, binding)
    return (
        isinstance(binding.statement, cst.ImportFrom)
        and binding.alias.asname is None
        and target is not None
        and target.module == "builtins"
        and target.name == binding.local
    )


def _removed_in(tables: Sequence[Table], use: PathUse):
    """(expression, table, path, Removal) for the removed name ``use`` names, if any; not the imported
    name itself (its import statement is where that one is rewritten or reported)."""
    chain = list(use.prefixes())
    found = _find(tables, chain[0][1]) if chain else None
    if found is None or len(found[1]) <= len(use.binding.path):
        return None
    node = next(node for node, path in chain if path == found[1])
    return node, *found


def _plan_use(plan: _Plan, tables, use: PathUse, parents, imported: set[str], dropped: set[int]) -> None:
    removed = _removed_in(tables, use)
    if removed is None or removed[3].new is None:
        return
    node, table, _, removal = removed
    new = _expression(_Target.parse(removal.new), table, use, plan, imported, dropped)
    if new is not None:
        plan.uses[node] = _parenthesized(new, node, parents.get(node))


def _expression(
    target: _Target, table: Table, use: PathUse, plan: _Plan, imported: set[str], dropped: set[int]
):
    """The code for ``target`` at ``use``, planning the import it needs; None where it cannot be written."""
    if target.module is None:
        return cst.parse_expression(target.name)
    if target.module == "builtins":
        builtin = all(isinstance(a, BuiltinAssignment) or id(a) in dropped for a in use.scope[target.name])
        return cst.Name(target.name) if builtin else None
    binding = use.binding
    reachable = target.module == binding.path or target.module in table.attribute_modules
    if binding.plain:  # ``import a.b`` binds ``a``: any module under it is written out in full
        written = f"{target.module}.{target.name}"
        if not reachable and target.module not in imported:
            needed = plan.imports_after.setdefault(binding.statement, [])
            needed += [] if target.module in needed else [target.module]
    elif reachable and (target.module + ".").startswith(binding.path + "."):
        written = binding.local + target.module[len(binding.path) :] + "." + target.name
    elif _free_for_import(
        use, target.module
    ):  # ``from scipy import interpolate``, ``import collections as C``
        written = f"{target.module}.{target.name}"
        needed = plan.imports_after.setdefault(binding.statement, [])
        needed += [] if target.module in needed or target.module in imported else [target.module]
    else:
        return None
    expression = cst.parse_expression(written)
    return cst.UnaryOperation(cst.Minus(), expression) if target.negate else expression


def _free_for_import(use: PathUse, module: str) -> bool:
    """Whether ``import module`` may be added for ``use``: its first name is bound, where the use is,
    by nothing but imports (or not at all)."""
    root = module.partition(".")[0]
    return all(
        isinstance(a, ImportAssignment)
        and isinstance(a.node, cst.Import)
        and any(
            alias.asname is None and import_alias_name(alias).partition(".")[0] == root
            for alias in a.node.names
        )
        for a in use.scope[root]
    )


def _parenthesized(new: cst.BaseExpression, old: cst.CSTNode, parent: cst.CSTNode | None):
    """``new`` in parentheses where it is a negation and ``old`` an operand (``(-np.inf).real``)."""
    operand = isinstance(
        parent, cst.Attribute | cst.Subscript | cst.BinaryOperation | cst.UnaryOperation
    ) or (isinstance(parent, cst.Call) and parent.func is old)
    if isinstance(new, cst.UnaryOperation) and operand:
        return new.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return new


def _plan_from_import(plan: _Plan, tables, statement: cst.ImportFrom, bindings: list[Binding]) -> None:
    """``from module import old [as x]``: each alias with an exact replacement becomes ``new as old``
    (or ``x``), in a statement of its own module where that differs; a builtin's import goes."""
    module = from_module(statement)
    assert module is not None and not isinstance(statement.names, cst.ImportStar)
    by_alias = {id(b.alias): b for b in bindings}
    items: list[tuple[str, str, str | None, str | None]] = []  # module, name, as, comment
    renamed: dict[int, tuple[str, str | None]] = {}
    for alias in statement.names:
        binding = by_alias.get(id(alias))
        target = _exact(tables, binding) if binding is not None else None
        asname = dotted(alias.asname.name) if alias.asname else None
        if binding is not None and _dropped(tables, binding):
            continue
        if binding is None or target is None or target.module in (None, "builtins") or target.negate:
            items.append((module, alias.name.value, asname, alias_comment(alias)))
            continue
        new_asname = None if target.name == binding.local else binding.local
        items.append((target.module, target.name, new_asname, alias_comment(alias)))
        renamed[id(alias)] = (target.name, new_asname)
    if not renamed and len(items) == len(statement.names):
        return
    if len(items) == len(statement.names) and all(item[0] == module for item in items):
        # renamed in place: the statement keeps its formatting
        names = [
            _renamed(alias, *renamed[id(alias)]) if id(alias) in renamed else alias
            for alias in statement.names
        ]
        plan.statements[statement] = [statement.with_changes(names=names)]
        return
    multiline = statement.lpar is not None and "\n" in cst.Module([]).code_for_node(statement)
    items.sort(key=lambda item: item[0] != module)  # the statement's own module stays first
    plan.statements[statement] = list(from_imports(items, multiline))


def _renamed(alias: cst.ImportAlias, name: str, asname: str | None) -> cst.ImportAlias:
    return alias.with_changes(
        name=cst.Name(name), asname=cst.AsName(name=cst.Name(asname)) if asname else None
    )


class _Rewriter(cst.CSTTransformer):
    def __init__(self, plan: _Plan) -> None:
        super().__init__()
        self.plan = plan

    def _use(self, original, updated):
        return self.plan.uses.get(original, updated)

    def leave_Name(self, original_node, updated_node):
        return self._use(original_node, updated_node)

    def leave_Attribute(self, original_node, updated_node):
        return self._use(original_node, updated_node)

    def leave_ImportFrom(self, original_node, updated_node):
        return self._with_imports(original_node, self.plan.statements.get(original_node, [updated_node]))

    def leave_Import(self, original_node, updated_node):
        return self._with_imports(original_node, [updated_node])

    def _with_imports(self, original, statements: list[cst.BaseSmallStatement]):
        """``statements`` followed by the imports the rewritten uses of its names need."""
        extra = self.plan.imports_after.get(original, [])
        statements = [
            *statements,
            *(cst.Import(names=[cst.ImportAlias(name=cst.parse_expression(m))]) for m in extra),
        ]
        if not statements:
            return cst.RemoveFromParent()
        return statements[0] if len(statements) == 1 else cst.FlattenSentinel(statements)

    def leave_SimpleStatementLine(self, original_node, updated_node):
        return one_statement_a_line(original_node, updated_node)


def leftovers(wrapper: MetadataWrapper, path: str, tables: Sequence[Table] = TABLES) -> list[Finding]:
    """The removed names ``wrapper.module`` (a ported module) still uses, with what to use instead."""
    if not _may_use(wrapper.module.code, tables):
        return []
    bindings, uses = path_uses(wrapper, {r for t in tables for r in t.roots})
    positions = wrapper.resolve(PositionProvider)
    places: dict[tuple[int, str], Finding] = {}

    def report(node: cst.CSTNode, written: str, full: str) -> None:
        found = _find(tables, full)
        if found is None:
            return
        table, matched, removal = found
        line = positions[node].start.line
        finding = Finding(path, line, table.kind, _message(written, matched, removal))
        places.setdefault((line, matched), finding)

    for binding in bindings.values():
        if not binding.plain or binding.local == import_alias_name(binding.alias):
            report(binding.statement, binding.path, binding.path)
    for use in uses:
        removed = _removed_in(tables, use)
        if removed is not None:
            report(removed[0], dotted(use.node) or removed[2], removed[2])
    return sorted(places.values(), key=lambda f: (f.line, f.message))


def _message(written: str, path: str, removal: Removal) -> str:
    subject = f"`{written}`" if written == path else f"`{written}` ({path})"
    head = {
        Status.REMOVED: f"was removed in {removal.since}",
        Status.REDEFINED: f"was removed in {removal.since} and now names something else",
        Status.STUB: f"only raises since {removal.since}",
        Status.DEPRECATED: f"is deprecated and goes in {removal.since}",
    }[removal.status]
    return f"{subject} {head}; instead: {removal.replacement}"
