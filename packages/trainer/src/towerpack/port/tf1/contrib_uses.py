"""Where a module uses tf.contrib, for contrib_rewrite.py: the TensorFlow imports it can name homes
through, every use of a contrib name (through ``tf``, an import of contrib itself, or a name assigned
a contrib module) with the call it makes, and where added imports go."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst
from libcst.metadata import ParentNodeProvider, PositionProvider, ScopeProvider

from ..syntax import dotted, from_module, import_alias_name, uses
from .contrib_table import Covers, lookup
from .names import TFName

V1 = "tensorflow.compat.v1"
PACKAGES = ("tf_slim", "tensorflow_probability")  # the homes outside TensorFlow
_COMPAT = "towerpack.trainer.compat"
_COMPAT_NAMES = {"tf": "tensorflow", "tfv1": V1}


@dataclass(frozen=True)
class Use:
    """A use of a binding: the longest dotted chain, the contrib path it names, the call it makes."""

    node: cst.Attribute | cst.Name
    path: str
    call: cst.Call | None


@dataclass
class Binding:
    """A name bound to a contrib path by ``statement`` (an import, or ``name = tf.contrib...``)."""

    statement: cst.CSTNode
    alias: cst.ImportAlias | None
    local: str
    path: str
    uses: list[Use] = field(default_factory=list)


def _contrib_path(name: TFName) -> str | None:
    api = name.api()
    if api is None or not (api[1] == "contrib" or api[1].startswith("contrib.")):
        return None
    return api[1]


class Finder(cst.CSTVisitor):
    """Collects TensorFlow imports (``roots``), contrib uses through them, and contrib bindings."""

    METADATA_DEPENDENCIES = (ScopeProvider, ParentNodeProvider, PositionProvider)

    def __init__(self) -> None:
        super().__init__()
        self.roots: list[tuple[str, bool]] = []  # module-level (local name, is tf.compat.v1)
        self.direct: dict[cst.CSTNode, Use] = {}  # tf.contrib... through a TensorFlow import
        self.bindings: list[Binding] = []
        self.imports: set[str] = set()  # module-level import statements, as code
        self.globals: set[str] = set()  # names bound at module level
        self.anchor: cst.SimpleStatementLine | None = None  # where added imports go
        self.homes: list[tuple[cst.CSTNode, str]] = []  # imports of PACKAGES: (statement, package)
        self._top_level: set[cst.CSTNode] = set()
        self._assigns: list[cst.Assign] = []

    def _meta(self, provider, node):
        return self.get_metadata(provider, node, None)

    def visit_Module(self, node: cst.Module) -> None:
        for statement in node.body:
            if isinstance(statement, cst.SimpleStatementLine):
                self._top_level.update(statement.body)
                if all(isinstance(s, cst.Import | cst.ImportFrom) for s in statement.body):
                    self.imports.add(cst.Module([]).code_for_node(statement).strip())
        last_import = None
        for statement in node.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                break
            if all(isinstance(s, cst.Import | cst.ImportFrom) for s in statement.body):
                last_import = statement
                if any(_imports_tensorflow(s) for s in statement.body) and self.anchor is None:
                    self.anchor = statement
        self.anchor = self.anchor or last_import

    def leave_Module(self, original_node: cst.Module) -> None:
        scope = self._meta(ScopeProvider, original_node)
        if scope is not None:
            self.globals = {a.name for a in scope.assignments}
        for assign in self._assigns:
            self._alias(assign)

    def _use(self, node: cst.Attribute | cst.Name, path: str) -> Use:
        parent = self._meta(ParentNodeProvider, node)
        call = parent if isinstance(parent, cst.Call) and parent.func is node else None
        return Use(node, path, call)

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name = import_alias_name(alias)
            self._home(node, name)
            if name != "tensorflow" and not name.startswith("tensorflow."):
                continue
            api = TFName(name).api()
            if api is not None and api[1] == "" and node in self._top_level:
                local = dotted(alias.asname.name) if alias.asname else name
                self.roots.append((local or name, api[0] == "v1"))
            path = _contrib_path(TFName(name))
            if path is not None and alias.asname is not None:
                local = dotted(alias.asname.name)
                assert local is not None
                self.bindings.append(Binding(node, alias, local, path))
        for assignment, use in uses(self._meta, node):
            binding = self._binding(node, assignment.name)
            if binding is not None:
                self._bound_use(binding, use)
                continue
            imported = _imported(node, assignment.name)
            if not use.attributes or not _is_tensorflow(imported) or _contrib_path(TFName(imported)):
                continue  # `import tensorflow.contrib.x` itself is left to the report
            path = _contrib_path(TFName(imported, use.attributes))
            if path is not None:
                self.direct[use.node] = self._use(use.node, path)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        module = from_module(node)
        if module is not None:
            self._home(node, module)
        if module == _COMPAT and not isinstance(node.names, cst.ImportStar):
            self._compat_roots(node)
            return
        if module is None or not _is_tensorflow(module) or isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            path = _contrib_path(TFName(module, (alias.name.value,), from_import=True))
            if path is not None:
                local = dotted(alias.asname.name) if alias.asname else alias.name.value
                assert local is not None
                self.bindings.append(Binding(node, alias, local, path))
        for assignment, use in uses(self._meta, node):
            binding = self._binding(node, assignment.name)
            if binding is not None:
                self._bound_use(binding, use)

    def _compat_roots(self, node: cst.ImportFrom) -> None:
        """towerpack.trainer.compat's ``tf`` and ``tfv1``: TensorFlow's modules under other names."""
        assert not isinstance(node.names, cst.ImportStar)
        modules = {}
        for alias in node.names:
            module = _COMPAT_NAMES.get(alias.name.value)
            local = dotted(alias.asname.name) if alias.asname else alias.name.value
            if module is not None and local is not None:
                modules[local] = module
                if node in self._top_level:
                    self.roots.append((local, module == V1))
        for assignment, use in uses(self._meta, node):
            module = modules.get(assignment.name)
            path = _contrib_path(TFName(module, use.attributes)) if module and use.attributes else None
            if path is not None:
                self.direct[use.node] = self._use(use.node, path)

    def _home(self, node: cst.CSTNode, module: str) -> None:
        package = module.split(".")[0]
        if package in PACKAGES:
            self.homes.append((node, package))

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self._assigns.append(node)

    def _binding(self, statement: cst.CSTNode, local: str) -> Binding | None:
        for binding in self.bindings:
            if binding.statement is statement and binding.local == local:
                return binding
        return None

    def _bound_use(self, binding: Binding, use) -> None:
        path = ".".join((binding.path, *use.attributes))
        binding.uses.append(self._use(use.node, path))

    def _alias(self, assign: cst.Assign) -> None:
        """``name = <a contrib path>``: a binding, if the name is assigned only there."""
        found = self.direct.get(assign.value)
        target = assign.targets[0].target
        assert isinstance(target, cst.Name)
        scope = self._meta(ScopeProvider, target)
        if found is None or scope is None or len(scope.assignments[target.value]) != 1:
            return
        entry = lookup(found.path)
        if entry is not None and (entry.rest or entry.rewrite is None or entry.rewrite.covers is Covers.NAME):
            return  # a name, not a module: its value is rewritten where it stands
        binding = Binding(assign, None, target.value, found.path)
        binding.uses.append(found)  # the assigned value itself
        (assignment,) = scope.assignments[target.value]
        for access in assignment.references:
            node = access.node
            attributes: list[str] = []
            parent = self._meta(ParentNodeProvider, node)
            while isinstance(parent, cst.Attribute) and parent.value is node:
                attributes.append(parent.attr.value)
                node = parent
                parent = self._meta(ParentNodeProvider, node)
            if isinstance(node, cst.Attribute | cst.Name):
                binding.uses.append(self._use(node, ".".join((found.path, *attributes))))
        self.bindings.append(binding)


def _is_tensorflow(module: str) -> bool:
    return module == "tensorflow" or module.startswith("tensorflow.")


def _imports_tensorflow(statement: cst.BaseSmallStatement) -> bool:
    if isinstance(statement, cst.Import):
        return any(_is_tensorflow(import_alias_name(a)) for a in statement.names)
    module = from_module(statement) if isinstance(statement, cst.ImportFrom) else None
    return module is not None and _is_tensorflow(module)


def _imported(statement: cst.Import, local: str) -> str:
    """The module an ``import`` binds to ``local`` (its dotted name where there is no ``as``)."""
    for alias in statement.names:
        if alias.asname is not None and dotted(alias.asname.name) == local:
            return import_alias_name(alias)
    return local
