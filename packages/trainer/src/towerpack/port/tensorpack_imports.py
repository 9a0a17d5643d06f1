"""Rewrites a module's imports of the reference (tensorpack) to towerpack's, by the reference map.

``from tensorpack import BatchData, SimpleTrainer`` becomes one ``from`` line per towerpack module
(formatting kept when the names stay together), ``import tensorpack.x as y`` imports x's home, and
dotted uses of an imported module (``tensorpack.tfutils.summary.add_moving_summary``, ``tp.BatchData``)
are rewritten where the name now lives elsewhere, with the import they need. Names and modules with
no home stay as they are; ``leftovers`` lists them for the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider, ScopeProvider

from .findings import Finding, Kind
from .reference_map import REFERENCE
from .resolve import How, is_reference, module_home, resolve_name, resolve_path, star_homes
from .syntax import (
    ReplacesUses,
    alias_comment,
    dotted,
    expression,
    from_imports,
    from_module,
    import_alias_name,
    one_statement_a_line,
    uses,
)


@dataclass(frozen=True)
class _Binding:
    """An imported reference module as the code uses it: ``local`` names the reference module
    ``reference``, which now lives in ``home`` (None when the name ``tensorpack`` itself is bound by
    ``import tensorpack.x``: then every use is written out in full)."""

    local: str
    reference: str
    home: str | None


@dataclass
class _Plan:
    statements: dict[cst.CSTNode, list[cst.BaseSmallStatement]] = field(default_factory=dict)
    uses: dict[cst.CSTNode, str] = field(default_factory=dict)
    no_home_uses: dict[str, str] = field(default_factory=dict)  # the use as written -> advice


def rewrite(module: cst.Module) -> tuple[cst.Module, dict[str, str]]:
    """The module with its reference imports rewritten, and the dotted uses left alone because the
    name has no home (as written -> what to do instead)."""
    wrapper = MetadataWrapper(module)
    planner = _Planner()
    wrapper.visit(planner)
    if not planner.plan.statements:
        return module, {}
    return wrapper.module.visit(_Rewriter(planner.plan)), planner.plan.no_home_uses


def leftovers(wrapper: MetadataWrapper, path: str, no_home_uses: dict[str, str]) -> list[Finding]:
    """The reference imports and uses a port leaves in ``wrapper.module`` (a ported module): names and
    modules with no home in towerpack, and modules the reference never had."""
    finder = _Leftovers(path, no_home_uses)
    wrapper.visit(finder)
    return finder.findings


class _Planner(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (ScopeProvider, ParentNodeProvider)

    def __init__(self) -> None:
        super().__init__()
        self.plan = _Plan()

    def _meta(self, provider, node):
        return self.get_metadata(provider, node, None)

    def visit_Import(self, node: cst.Import) -> None:
        if not any(is_reference(import_alias_name(a)) for a in node.names):
            return
        aliases: list[cst.ImportAlias] = []
        bindings: dict[str, _Binding] = {}
        roots: set[str] = set()
        for alias in node.names:
            name = import_alias_name(alias)
            home = module_home(name).module if is_reference(name) else None
            if home is None:
                aliases.append(alias)
                continue
            aliases.append(alias.with_changes(name=expression(home)))
            if alias.asname is None:
                roots.add(name)
            else:
                local = dotted(alias.asname.name)
                assert local is not None
                bindings[local] = _Binding(local, name, home)
        if aliases == list(node.names):
            return
        imported = {import_alias_name(a) for a in aliases}
        extra = self._rewrite_uses(node, bindings, roots)
        new = node.with_changes(names=aliases)
        self.plan.statements[node] = [new, *_imports(m for m in extra if m not in imported)]

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = from_module(node)
        if module is None or module not in REFERENCE or REFERENCE[module].home is None:
            return
        if isinstance(node.names, cst.ImportStar):
            homes, moved = star_homes(module)
            stars = [cst.ImportFrom(module=expression(home), names=cst.ImportStar()) for home in homes]
            self.plan.statements[node] = stars + from_imports(
                [(home, name, None, None) for name, home in moved.items()], multiline=False
            )
            return
        items: list[tuple[str, str, str | None, str | None]] = []  # module, name, as, comment
        kept: list[tuple[str, str, str | None, str | None]] = []
        bindings: dict[str, _Binding] = {}
        for alias in node.names:
            name = alias.name.value
            asname = dotted(alias.asname.name) if alias.asname else None
            target = resolve_name(module, name)
            if target.how is How.NO_HOME or target.module is None:
                kept.append((module, name, asname, alias_comment(alias)))
            elif target.how is How.SUBMODULE and target.reference is not None:
                parent, _, last = target.module.rpartition(".")
                local = asname or name
                items.append((parent, last, None if last == local else local, alias_comment(alias)))
                bindings[local] = _Binding(local, target.reference, target.module)
            else:
                items.append((target.module, name, asname, alias_comment(alias)))
        if not items:
            return
        groups = list(dict.fromkeys(item[0] for item in items))
        unchanged = not kept and all(
            (it[1], it[2]) == (a.name.value, _asname(a)) for it, a in zip(items, node.names, strict=True)
        )
        if len(groups) == 1 and unchanged:
            statements: list[cst.BaseSmallStatement] = [node.with_changes(module=expression(groups[0]))]
        else:
            multiline = node.lpar is not None and "\n" in cst.Module([]).code_for_node(node)
            statements = from_imports(items + kept, multiline)
        extra = self._rewrite_uses(node, bindings, set())
        self.plan.statements[node] = statements + _imports(extra)

    def _rewrite_uses(self, node, bindings: dict[str, _Binding], roots: set[str]) -> list[str]:
        """Plan the rewrite of the uses of ``node``'s bindings; the modules they need imported, sorted."""
        needed: list[str] = []
        for assignment, use in uses(self._meta, node):
            binding = bindings.get(assignment.name)
            if binding is None:
                if not roots or assignment.name not in REFERENCE:
                    continue
                binding = _Binding(assignment.name, assignment.name, None)
            target = resolve_path(binding.reference, use.attributes)
            written = dotted(use.node)
            if target.how is How.NO_HOME:
                self.plan.no_home_uses[written or ""] = target.advice
                continue
            home = binding.home
            if home is not None and (target.path == home or target.path.startswith(home + ".")):
                new = binding.local + target.path[len(home) :]
            else:
                new = target.path
                if target.module is not None and target.module not in needed:
                    needed.append(target.module)
            if new != written:
                self.plan.uses[use.node] = new
        return sorted(needed)


class _Rewriter(ReplacesUses, cst.CSTTransformer):
    def __init__(self, plan: _Plan) -> None:
        super().__init__()
        self.plan = plan

    def _statement(self, original, updated):
        new = self.plan.statements.get(original)
        if new is None:
            return updated
        return new[0] if len(new) == 1 else cst.FlattenSentinel(new)

    def leave_Import(self, original_node, updated_node):
        return self._statement(original_node, updated_node)

    def leave_ImportFrom(self, original_node, updated_node):
        return self._statement(original_node, updated_node)

    def leave_SimpleStatementLine(self, original_node, updated_node):
        return one_statement_a_line(original_node, updated_node)


class _Leftovers(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, path: str, no_home_uses: dict[str, str]) -> None:
        super().__init__()
        self.path = path
        self.no_home_uses = no_home_uses
        self.findings: list[Finding] = []

    def _add(self, node: cst.CSTNode, message: str) -> None:
        line = self.get_metadata(PositionProvider, node).start.line
        self.findings.append(Finding(self.path, line, Kind.NO_HOME, message))

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = import_alias_name(alias)
            if is_reference(name):
                self._add(node, _module_message(name))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = from_module(node)
        if module is None or not is_reference(module):
            return
        if (
            module not in REFERENCE
            or REFERENCE[module].home is None
            or isinstance(node.names, cst.ImportStar)
        ):
            self._add(node, _module_message(module))
            return
        for alias in node.names:
            target = resolve_name(module, alias.name.value)
            if target.how is How.NO_HOME:
                self._add(node, f"{module}.{alias.name.value} has no home in towerpack: {target.advice}")

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        written = dotted(node)
        if written is not None and written in self.no_home_uses:
            self._add(node, f"{written} has no home in towerpack: {self.no_home_uses[written]}")
            return False
        return True


def _module_message(module: str) -> str:
    target = module_home(module)
    if target.how is How.NO_HOME:
        return f"{module} has no home in towerpack: {target.advice}"
    return f"{module} is not a module of the reference (tensorpack 0.11): port this import by hand"


def _asname(alias: cst.ImportAlias) -> str | None:
    return dotted(alias.asname.name) if alias.asname else None


def _imports(modules) -> list[cst.BaseSmallStatement]:
    return [cst.Import(names=[cst.ImportAlias(name=expression(m))]) for m in modules]
